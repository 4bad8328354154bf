"""Apache Kafka itself as the peer: its jars resolved from Maven Central and its processes run beside ours.

- ``jars``: the artifact sets (Kafka 3.9's broker with its tools and streams; the newest 4.x clients,
  tools and streams), resolved with ``mvn dependency:copy-dependencies`` into ``.run/kafka/``;
- ``broker``: a real Kafka 3.9 broker in ZooKeeper mode as a child process, with the lifecycle the
  project's own daemons have (start, SIGKILL, SIGSTOP, bounce, logs kept);
- ``tools``: Kafka's command-line tools by their main classes in each version (3.9, 4.4), and single-file
  Java programs compiled once against a version's jars;
- ``python -m kafkapeer resolve`` (``make kafka``) fetches the jars once.

Tooling on the top floors, beside ``zkserver/``: no daemon imports it.
"""
