"""What the tests share, one copy of each:

- ``waiting``: ``wait_until`` (and ``wait_until_sync``), waiting on conditions with a timeout;
- ``cluster``: the ``cluster`` fixture, daemons on loopback around the test's ZooKeeper chroot (real
  brokers, simulated brokers, controllers), and helpers over them (``produce``, ``epoch_of``, ...);
- ``broker_sim``: simulated brokers, registered in ZooKeeper and validating control requests as
  Kafka's do (also ``python -m tests.support.broker_sim``);
- ``raw_client``: a bare Kafka-protocol client for frames a real client would never send;
- ``clients``: unmodified Kafka clients pointed at a test cluster (``confluent_consume``,
  ``confluent_round_trip``);
- ``zookeeper``: sessions, forced session expiry, cut connections, partition state znodes, brokers
  registered without a process (``register``);
- ``requests``: request bodies written by hand (control requests, AlterPartition);
- ``event_logs``: reading a launcher-made cluster's event logs, and the kinds the sources emit;
- ``metrics``: Prometheus samples, scraped from a daemon's ``/metrics`` (``scrape``) or read off a
  registry in the test's process (``registry_samples``);
- ``compose``: the compose files as ``docker compose config`` normalizes them, and their services
  by kind and start-up order;
- ``local_compose``: a compose model's services run as local processes on loopback
  (``LocalCompose``, ``running_compose``).

Test modules import helpers from here (or from their own package's builders), never from another
test module.

The ZooKeeper server and per-test chroot fixtures are in ``tests/conftest.py``.
"""
