"""Who may talk to the cluster: TLS contexts, principals, SASL mechanisms, ACLs and their authorizer.

Shared by both daemons and the command-line tools; it depends on ``protocol/`` and ``zkstore/`` but
on no daemon.
"""
