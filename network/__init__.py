"""Kafka connections, both ends: the request server every listener runs, client connections (asyncio and
blocking), connection quotas and the socket side of the SASL handshake.

Above ``security/`` (TLS and SASL) and ``protocol/``; below the daemons, which only add what their
listeners do differently (the broker's planes and control queue).
"""
