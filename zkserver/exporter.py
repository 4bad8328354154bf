"""Prometheus metrics of ZooKeeper servers, read from their ``mntr`` four-letter word.

ZooKeeper's own Prometheus metrics provider (``PrometheusMetricsProvider``, ZooKeeper 3.6+) ships in a
jar of its own (``zookeeper-prometheus-metrics``) that neither pyspark's jars nor Debian's package
carry, so the local runner's servers cannot serve it. Their ``mntr`` answer holds the same values
(``zk_<name>``, with ``zk_avg_``/``zk_min_``/``zk_max_``/``zk_cnt_``/``zk_sum_`` and
``zk_p50_``…``zk_p999_`` lines for each summary), and this exporter serves them under the provider's
names:

* ``zk_<name> <number>`` → ``<name>`` (``znode_count``, ``num_alive_connections``, ``avg_latency``…);
* a summary ``<name>`` (where ``zk_cnt_<name>`` exists) → ``<name>{quantile="0.5"|"0.95"|"0.99"|"0.999"}``,
  ``<name>_count`` and ``<name>_sum``. The provider's quantiles are 0.5, 0.9 and 0.99 over a rotating
  minute; ``mntr`` has p50, p95, p99 and p999 since the server started (or ``srst``), and no p90.

For the dashboards written against the JMX exporter (Strimzi's and Confluent's ZooKeeper dashboards),
the server bean's attributes are also exported under those names (``zookeeper_avgrequestlatency``,
``zookeeper_numaliveconnections``, ``zookeeper_outstandingrequests``,
``zookeeper_inmemorydatatree_nodecount``, …). Every series has a ``server`` label (``host:port``);
``zookeeper_up`` says whether the server answered this scrape, ``zookeeper_server_state`` its role.

``mntr`` must be in the server's ``4lw.commands.whitelist``. Run it as
``python -m zkserver.exporter --zookeeper HOST:PORT[,HOST:PORT…] --port N``; against the servers' TLS
port with ``zookeeper.ssl.client.enable`` and the client keys of ``--zk-config FILE`` or the daemons'
``KAFKA_ZOOKEEPER_SSL_*`` variables.
"""

from __future__ import annotations

import argparse
import functools
import logging
import signal
import ssl
import threading
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import Metric

from daemon.config import ConfigError, load_config
from zkserver.four_letter_words import four_letter_word
from zkstore.client_config import ZOOKEEPER_SECURITY_KEYS, zk_security_from_loaded
from zkstore.security import ssl_context

__all__ = ["JMX_NAMES", "MntrCollector", "families", "main", "parse_mntr"]

log = logging.getLogger("zkserver.exporter")

SUMMARY_STATS = ("avg", "min", "max", "cnt", "sum")
PERCENTILES = (("p50", "0.5"), ("p95", "0.95"), ("p99", "0.99"), ("p999", "0.999"))
"""``mntr``'s percentile prefixes and the ``quantile`` label each becomes."""

JMX_NAMES = {
    "avg_latency": "zookeeper_avgrequestlatency",
    "min_latency": "zookeeper_minrequestlatency",
    "max_latency": "zookeeper_maxrequestlatency",
    "num_alive_connections": "zookeeper_numaliveconnections",
    "outstanding_requests": "zookeeper_outstandingrequests",
    "packets_received": "zookeeper_packetsreceived",
    "packets_sent": "zookeeper_packetssent",
    "znode_count": "zookeeper_inmemorydatatree_nodecount",
    "watch_count": "zookeeper_inmemorydatatree_watchcount",
    "quorum_size": "zookeeper_quorumsize",
}
"""Provider name → the JMX exporter's name for the same attribute of ZooKeeper's server MBeans
(``AvgRequestLatency``, ``NumAliveConnections``, ``InMemoryDataTree.NodeCount``, ``QuorumSize``…)."""

DEFAULT_TIMEOUT_S = 2.0


def parse_mntr(text: str) -> dict[str, str]:
    """``mntr``'s tab-separated ``key value`` lines."""
    answer = {}
    for line in text.splitlines():
        key, sep, value = line.partition("\t")
        if sep and key.startswith("zk_"):
            answer[key] = value.strip()
    return answer


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _summaries(values: dict[str, str]) -> set[str]:
    return {key.removeprefix("zk_cnt_") for key in values if key.startswith("zk_cnt_")}


def _summary_part(key: str, summaries: set[str]) -> bool:
    """Whether ``key`` is one of a summary's ``zk_<stat>_<name>`` lines."""
    for prefix in (*SUMMARY_STATS, *(p for p, _ in PERCENTILES)):
        if key.startswith(f"zk_{prefix}_") and key.removeprefix(f"zk_{prefix}_") in summaries:
            return True
    return False


def families(values: dict[str, str], server: str) -> list[Metric]:
    """The metric families one server's ``mntr`` answer makes (see the module docstring)."""
    labels = {"server": server}
    summaries = _summaries(values)
    taken = {f"{name}{suffix}" for name in summaries for suffix in ("", "_count", "_sum")}
    out: list[Metric] = []
    for key, text in values.items():
        name = key.removeprefix("zk_")
        number = _number(text)
        if number is None or _summary_part(key, summaries) or name in taken:
            continue
        family = Metric(name, f"ZooKeeper's {name} (mntr {key})", "unknown")
        family.add_sample(name, labels, number)
        out.append(family)
        if name in JMX_NAMES:
            alias = Metric(JMX_NAMES[name], f"ZooKeeper's {name}, as the JMX exporter names it", "gauge")
            alias.add_sample(JMX_NAMES[name], labels, number)
            out.append(alias)
    for name in sorted(summaries):
        family = Metric(name, f"ZooKeeper's {name} summary (mntr zk_*_{name})", "summary")
        for prefix, quantile in PERCENTILES:
            value = _number(values.get(f"zk_{prefix}_{name}", ""))
            if value is not None:
                family.add_sample(name, {**labels, "quantile": quantile}, value)
        family.add_sample(f"{name}_count", labels, _number(values[f"zk_cnt_{name}"]) or 0.0)
        family.add_sample(f"{name}_sum", labels, _number(values.get(f"zk_sum_{name}", "")) or 0.0)
        out.append(family)
    return out


def _split(server: str) -> tuple[str, int]:
    host, _, port = server.rpartition(":")
    return host or "127.0.0.1", int(port)


class MntrCollector:
    """Asks every server for ``mntr`` at each scrape (a server that does not answer is ``zookeeper_up 0``)."""

    def __init__(
        self,
        servers: Sequence[str],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        ask: Callable[[str, int, str, float], str] = four_letter_word,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.servers = list(servers)
        self.timeout_s = timeout_s
        self.ask = ask if tls is None else functools.partial(four_letter_word, tls=tls)

    def describe(self) -> list[Metric]:
        return []  # the names depend on each server's answer

    def collect(self) -> Iterator[Metric]:
        up = Metric("zookeeper_up", "1 if the server answered mntr at this scrape", "gauge")
        state = Metric("zookeeper_server_state", "1 for the server's role (mntr zk_server_state)", "gauge")
        by_name: dict[str, Metric] = {}
        for server in self.servers:
            host, port = _split(server)
            try:
                values = parse_mntr(self.ask(host, port, "mntr", self.timeout_s))
            except OSError as exc:
                log.warning("ZooKeeper %s did not answer mntr: %s", server, exc)
                values = {}
            up.add_sample("zookeeper_up", {"server": server}, 1.0 if values else 0.0)
            if "zk_server_state" in values:
                state.add_sample(
                    "zookeeper_server_state", {"server": server, "state": values["zk_server_state"]}, 1.0
                )
            for family in families(values, server):
                merged = by_name.setdefault(family.name, family)
                if merged is not family:
                    merged.samples.extend(family.samples)
        yield up
        yield state
        yield from by_name.values()


def _tls(path: str | None) -> ssl.SSLContext | None:
    """The TLS context of ``zookeeper.ssl.client.enable`` and its keys (from ``path`` and the
    environment), or None for plaintext."""
    security = zk_security_from_loaded(load_config(ZOOKEEPER_SECURITY_KEYS, path))
    return ssl_context(security) if security.tls else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m zkserver.exporter", description="Serve ZooKeeper's mntr values as Prometheus metrics."
    )
    parser.add_argument(
        "--zookeeper",
        action="append",
        required=True,
        help="HOST:PORT of a server's client port (repeat it, or separate servers with commas)",
    )
    parser.add_argument("--port", type=int, default=9141, help="port to serve /metrics on (default 9141)")
    parser.add_argument("--host", default="0.0.0.0", help="address to serve on (default all)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="mntr timeout in seconds")
    parser.add_argument(
        "--zk-config",
        metavar="FILE",
        help="zookeeper.ssl.* settings to reach the servers' TLS port with; KAFKA_ZOOKEEPER_SSL_* "
        "variables override them, as for the daemons (docs/security.md)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    servers = [s.strip() for arg in args.zookeeper for s in arg.split(",") if s.strip()]
    try:
        tls = _tls(args.zk_config)
    except (ConfigError, OSError) as exc:  # ssl.SSLError is an OSError: a key or CA file it cannot use
        parser.exit(1, f"error: {exc}\n")
    registry = CollectorRegistry()
    registry.register(MntrCollector(servers, timeout_s=args.timeout, tls=tls))
    server, _ = start_http_server(args.port, addr=args.host, registry=registry)
    log.info("serving mntr of %s on %s:%d/metrics", ", ".join(servers), args.host, server.server_address[1])
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    stopped.wait()
    server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
