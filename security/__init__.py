"""Who may talk to the cluster: TLS contexts, principals, SASL mechanisms (both sides, sans-IO), ACLs.

Shared by both daemons and the command-line tools. It sits above ``daemon/`` and ``protocol/`` and
below everything that opens a connection (``network/``) or reads ZooKeeper (``zkstore/``); the
ZooKeeper-backed authorizer is ``authorizer/``, above ``zkstore/``.
"""
