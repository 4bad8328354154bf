"""The bottom floor every process shares, written once: configuration keys and errors, endpoints, the
size-prefixed frames of a byte stream, supervised tasks, the event log, metrics and process set-up.

It imports nothing of the project but ``protocol/``; the request server and client connections, which
need TLS and SASL, are one floor up in ``network/``.
"""
