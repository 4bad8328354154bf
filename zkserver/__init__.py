"""Real ZooKeeper servers for development and tests, a foreground server and an ``mntr`` exporter.

One module a job: finding Java and a product's jars (``java``, reusable by any JVM server) and
ZooKeeper's (``zookeeper_jars``), free ports (``ports``), zoo.cfg and TLS (``config``), the four-letter
words (``four_letter_words``), the JVM process (``process``), one server (``server``) or an ensemble
(``ensemble``), a foreground server (``python -m zkserver``) and a Prometheus exporter of ``mntr``
(``python -m zkserver.exporter``); the failures all raise are in ``errors``.

Tooling on the top floors: no daemon imports it.
"""
