"""A Kafka broker's MBeans at ``/metrics``: the Prometheus JMX exporter's Java agent with Strimzi's rules.

The names this project's daemons export (``daemon/metric_names.py``) are meant to be those a Kafka
broker gets from the JMX exporter configured as Strimzi configures it; a real Kafka 3.9 broker run with
:func:`agent_options` is the reference they are compared with (``tests/interop/test_metric_names.py``).
The agent jar comes from Maven Central with Kafka's (``kafkapeer.jars.JMX_EXPORTER``).
"""

from __future__ import annotations

from pathlib import Path

from kafkapeer.jars import agent_jar

__all__ = ["STRIMZI_KAFKA_RULES", "agent_options", "write_config"]

STRIMZI_KAFKA_RULES = r"""# The JMX exporter's rules for a Kafka broker, as Strimzi ships them for Kafka
# (kafka-metrics-config.yml in its examples/metrics/kafka-metrics.yaml; the same for ZooKeeper-era
# and KRaft brokers), themselves grown from the JMX exporter's example Kafka rules.
# First match wins; $N is the Nth group of the pattern, "<bean keys><attribute path>attribute";
# a long pattern is a double-quoted YAML string continued after a backslash.
lowercaseOutputName: true
rules:
  # Per-client, per-partition gauges (fetcher lag and the like).
  - pattern: kafka.server<type=(.+), name=(.+), clientId=(.+), topic=(.+), partition=(.*)><>Value
    name: kafka_server_$1_$2
    type: GAUGE
    labels:
      clientId: "$3"
      topic: "$4"
      partition: "$5"
  - pattern: kafka.server<type=(.+), name=(.+), clientId=(.+), brokerHost=(.+), brokerPort=(.+)><>Value
    name: kafka_server_$1_$2
    type: GAUGE
    labels:
      clientId: "$3"
      broker: "$4:$5"
  # socket-server-metrics: TLS and client software per listener and network processor.
  - pattern: "kafka.server<type=(.+), cipher=(.+), protocol=(.+), \
      listener=(.+), networkProcessor=(.+)><>connections"
    name: kafka_server_$1_connections_tls_info
    type: GAUGE
    labels:
      cipher: "$2"
      protocol: "$3"
      listener: "$4"
      networkProcessor: "$5"
  - pattern: "kafka.server<type=(.+), clientSoftwareName=(.+), clientSoftwareVersion=(.+), \
      listener=(.+), networkProcessor=(.+)><>connections"
    name: kafka_server_$1_connections_software
    type: GAUGE
    labels:
      clientSoftwareName: "$2"
      clientSoftwareVersion: "$3"
      listener: "$4"
      networkProcessor: "$5"
  # socket-server-metrics per listener and network processor: "-total" attributes count, others gauge.
  - pattern: "kafka.server<type=(.+), listener=(.+), networkProcessor=(.+)><>(.+-total):"
    name: kafka_server_$1_$4
    type: COUNTER
    labels:
      listener: "$2"
      networkProcessor: "$3"
  - pattern: "kafka.server<type=(.+), listener=(.+), networkProcessor=(.+)><>(.+):"
    name: kafka_server_$1_$4
    type: GAUGE
    labels:
      listener: "$2"
      networkProcessor: "$3"
  - pattern: kafka.server<type=(.+), listener=(.+), networkProcessor=(.+)><>(.+-total)
    name: kafka_server_$1_$4
    type: COUNTER
    labels:
      listener: "$2"
      networkProcessor: "$3"
  - pattern: kafka.server<type=(.+), listener=(.+), networkProcessor=(.+)><>(.+)
    name: kafka_server_$1_$4
    type: GAUGE
    labels:
      listener: "$2"
      networkProcessor: "$3"
  # "...Percent" metrics: a meter's MeanRate (RequestHandlerAvgIdlePercent) or a gauge's Value.
  - pattern: kafka.(\w+)<type=(.+), name=(.+)Percent\w*><>MeanRate
    name: kafka_$1_$2_$3_percent
    type: GAUGE
  - pattern: kafka.(\w+)<type=(.+), name=(.+)Percent\w*><>Value
    name: kafka_$1_$2_$3_percent
    type: GAUGE
  - pattern: kafka.(\w+)<type=(.+), name=(.+)Percent\w*, (.+)=(.+)><>Value
    name: kafka_$1_$2_$3_percent
    type: GAUGE
    labels:
      "$4": "$5"
  # Meters ("...PerSec"): their Count, without "PerSec", as counters; up to two keys as labels.
  - pattern: kafka.(\w+)<type=(.+), name=(.+)PerSec\w*, (.+)=(.+), (.+)=(.+)><>Count
    name: kafka_$1_$2_$3_total
    type: COUNTER
    labels:
      "$4": "$5"
      "$6": "$7"
  - pattern: kafka.(\w+)<type=(.+), name=(.+)PerSec\w*, (.+)=(.+)><>Count
    name: kafka_$1_$2_$3_total
    type: COUNTER
    labels:
      "$4": "$5"
  - pattern: kafka.(\w+)<type=(.+), name=(.+)PerSec\w*><>Count
    name: kafka_$1_$2_$3_total
    type: COUNTER
  # Gauges: their Value; up to two keys as labels.
  - pattern: kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+), (.+)=(.+)><>Value
    name: kafka_$1_$2_$3
    type: GAUGE
    labels:
      "$4": "$5"
      "$6": "$7"
  - pattern: kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+)><>Value
    name: kafka_$1_$2_$3
    type: GAUGE
    labels:
      "$4": "$5"
  - pattern: kafka.(\w+)<type=(.+), name=(.+)><>Value
    name: kafka_$1_$2_$3
    type: GAUGE
  # Timers and histograms as a summary without _sum: Count as "_count", each NNthPercentile as a
  # gauge labelled quantile="0.NN"; up to two keys as labels.
  - pattern: kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+), (.+)=(.+)><>Count
    name: kafka_$1_$2_$3_count
    type: COUNTER
    labels:
      "$4": "$5"
      "$6": "$7"
  - pattern: kafka.(\w+)<type=(.+), name=(.+), (.+)=(.*), (.+)=(.+)><>(\d+)thPercentile
    name: kafka_$1_$2_$3
    type: GAUGE
    labels:
      "$4": "$5"
      "$6": "$7"
      quantile: "0.$8"
  - pattern: kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+)><>Count
    name: kafka_$1_$2_$3_count
    type: COUNTER
    labels:
      "$4": "$5"
  - pattern: kafka.(\w+)<type=(.+), name=(.+), (.+)=(.*)><>(\d+)thPercentile
    name: kafka_$1_$2_$3
    type: GAUGE
    labels:
      "$4": "$5"
      quantile: "0.$6"
  - pattern: kafka.(\w+)<type=(.+), name=(.+)><>Count
    name: kafka_$1_$2_$3_count
    type: COUNTER
  - pattern: kafka.(\w+)<type=(.+), name=(.+)><>(\d+)thPercentile
    name: kafka_$1_$2_$3
    type: GAUGE
    labels:
      quantile: "0.$4"
  # KRaft's raft and metadata metrics (a ZooKeeper-mode broker has none): "-total" and "-max" count.
  - pattern: "kafka.server<type=raft-metrics><>(.+-total|.+-max):"
    name: kafka_server_raftmetrics_$1
    type: COUNTER
  - pattern: "kafka.server<type=raft-metrics><>(current-state): (.+)"
    name: kafka_server_raftmetrics_$1
    value: 1
    type: UNTYPED
    labels:
      $1: "$2"
  - pattern: "kafka.server<type=raft-metrics><>(.+):"
    name: kafka_server_raftmetrics_$1
    type: GAUGE
  - pattern: "kafka.server<type=raft-channel-metrics><>(.+-total|.+-max):"
    name: kafka_server_raftchannelmetrics_$1
    type: COUNTER
  - pattern: "kafka.server<type=raft-channel-metrics><>(.+):"
    name: kafka_server_raftchannelmetrics_$1
    type: GAUGE
  - pattern: "kafka.server<type=broker-metadata-metrics><>(.+):"
    name: kafka_server_brokermetadatametrics_$1
    type: GAUGE
"""
"""Strimzi's JMX-exporter configuration for Kafka, as the agent reads it."""


def write_config(directory: Path) -> Path:
    """``directory/jmx-exporter.yml`` holding :data:`STRIMZI_KAFKA_RULES`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "jmx-exporter.yml"
    path.write_text(STRIMZI_KAFKA_RULES)
    return path


def agent_options(port: int, directory: Path, host: str = "127.0.0.1") -> tuple[str, ...]:
    """The JVM options (for ``KafkaBroker.java_options``) that serve the JVM's MBeans at
    ``http://host:port/metrics`` under Strimzi's rules (written to ``directory``);
    :class:`kafkapeer.jars.JarsMissing` if the agent was never resolved."""
    return (f"-javaagent:{agent_jar()}={host}:{port}:{write_config(directory)}",)
