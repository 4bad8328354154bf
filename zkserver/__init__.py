"""Real ZooKeeper servers for development and tests: finding Java and the jars, ports, server
configuration and TLS, the JVM process, one server or an ensemble (``local_server``), a foreground
server (``python -m zkserver``) and a Prometheus exporter of ``mntr`` (``python -m zkserver.exporter``).

Tooling on the top floors: no daemon imports it.
"""
