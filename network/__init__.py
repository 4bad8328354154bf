"""Kafka connections, both ends: the connection front-end every listener runs, the request server over
it, client connections (asyncio and blocking), connection quotas and the socket side of SASL.

Above ``security/`` (TLS and the sans-IO SASL exchanges) and ``protocol/``; below the daemons, which only
add what their listeners do differently (the broker's planes and control queue).
"""
