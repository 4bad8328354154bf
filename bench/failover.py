"""Controller failover at scale: from election to the last broker's acknowledgement.

A new controller must load every partition from ZooKeeper and tell every broker about all of them
(UpdateMetadata with the live brokers, LeaderAndIsr per broker, UpdateMetadata with every partition)
before the cluster is fully served again. For each (partitions, brokers) case this writes a fresh
cluster into its own chroot of one ZooKeeper server (``bench.zk_populate``: RF 3, preferred leaders,
all on live brokers), registers ``bench.ack_brokers`` for it, then starts ``python -m controller``
``--runs`` times in turn, each a real process taking over from the one before, and reads its event
log (events.jsonl):

* ``controller_elected`` -> the last ``response_received`` of a LeaderAndIsr or UpdateMetadata that
  carries the new controller epoch (the headline figure, median of the runs; target <= 7 s at 100k
  partitions);
* the same interval as ZooKeeper and the brokers saw it (``elected_to_last_ack_s``): from the election
  multi's commit (``/controller_epoch``'s mtime) to the last LeaderAndIsr or UpdateMetadata of that
  epoch the ack brokers answered (their wall clock), which needs nothing from the controller's own log,
  so ``bench.kafka_anchor`` measures Apache Kafka's controller with it too; with the partitions those
  answered requests carried (``acked``);
* ``failover_complete``'s ``duration_ms`` (loading and queueing, without waiting for brokers);
* a floor: one multi-read of every partition-state znode, timed alone before the runs (the controller
  reads them all), and the headline's ratio to it;
* requests and bytes as the brokers counted them, and the controller's peak RSS (VmHWM);
* the controller's CPU seconds (start-up included, and from the election on), the ack brokers' (one
  process only) and the share of the time some task of the machine waited for a CPU (Linux PSI): on a
  loaded machine wall times grow, CPU seconds much less.

``--reelections N`` adds N warm takeovers after each: ``/controller`` is deleted under the running
controller, which resigns and wins again in the same process (``all_warm_elected_to_last_ack_s``).
``--ibp 3.9`` runs the controller and the ack brokers on Apache Kafka 3.9's control-plane wire
(LeaderAndIsr v7, UpdateMetadata v8) instead of the seeds' (the default, 2.3-IV2).

``--security ssl`` runs the controller and the ack brokers with mutual TLS (``MutualTls``: the secure
layout's certificates, the brokers registered with an SSL listener); ``bench.tls`` runs both beside
each other.

Results go to bench/results/failover.json and a table on stdout.

    .venv/bin/python -m bench.failover [--partitions 10000,50000,100000] [--brokers 3,200] [--runs 3]
        [--security plaintext|ssl] [--ibp 2.3-IV2|3.9] [--reelections 0] [--quick] [--heap 2g]
        [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.ack_brokers import AckBrokers, merge_stats
from bench.controller_run import ControllerRun, answered_requests, one_failover, reelect, timeline
from bench.machine import machine, write_report
from bench.measure import cpu_seconds, cpu_stall_us, peak_rss_mib, stall_share
from bench.takeover import Sent, acknowledged, last_election
from bench.zk_populate import Cluster, Populated, ensure_chroot, populate
from bench.zookeeper import zookeeper_workdir
from cluster.secure import SecureCluster
from protocol.ibp import DEFAULT_IBP
from security.config import ClientSecurity
from zkserver.server import ZooKeeperServer
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.batch_read import get_data_many

TARGET_S = 7.0
"""Election to last acknowledgement at 100k partitions."""
TARGET_PARTITIONS = 100_000
BROKERS_PER_ACK_PROCESS = 100


SECURITY = ("plaintext", "ssl")
TLS_KEYS = ("ssl.keystore.location", "ssl.truststore.location", "ssl.client.auth")


@dataclass(frozen=True)
class MutualTls:
    """The TLS part of the secure layout (``cluster.secure``), without its ACLs or ZooKeeper ACLs.

    The controller's RPC listener is SSL and it dials SSL brokers with its own certificate; the ack
    brokers serve TLS with a broker certificate and require the controller's. ZooKeeper stays plain.
    """

    controller: dict[str, Any]
    """Controller settings: the SSL RPC listener, keystore, truststore and client auth."""
    broker: dict[str, Any]
    """Broker 1's keystore, truststore and client auth (every ack broker presents this certificate)."""
    secure: SecureCluster

    @classmethod
    def create(cls, directory: Path, controller_id: int = 1001) -> MutualTls:
        """A throwaway CA and certificates in ``directory``."""
        secure = SecureCluster.create(directory)
        controller = secure.controller(controller_id)
        broker = secure.broker(1)
        return cls(
            {k: controller[k] for k in ("listeners", "listener.security.protocol.map", *TLS_KEYS)},
            {k: broker[k] for k in TLS_KEYS},
            secure,
        )

    @property
    def ack_files(self) -> tuple[Path, Path]:
        """(keystore, truststore) for ``AckBrokers``."""
        return Path(self.broker["ssl.keystore.location"]), Path(self.broker["ssl.truststore.location"])

    def controller_client(self) -> ClientSecurity:
        """How a stand-in controller dials an SSL listener: the controller's certificate, the CA trusted."""
        return self.secure.dialing(Path(self.controller["ssl.keystore.location"]))


def state_paths(cluster: Cluster) -> list[str]:
    """Every partition-state znode ``bench.zk_populate`` writes for ``cluster``."""
    paths = []
    for t in range(-(-cluster.partitions // cluster.per_topic)):
        count = min(cluster.per_topic, cluster.partitions - t * cluster.per_topic)
        paths += [znodes.partition_state_path(cluster.topic(t), p) for p in range(count)]
    return paths


async def time_state_read(zk: AsyncZooKeeper, cluster: Cluster) -> float:
    """Seconds to multi-read every partition state: a floor no failover can beat (it reads them all)."""
    paths = state_paths(cluster)
    began = time.perf_counter()
    results = await get_data_many(zk, paths)
    seconds = time.perf_counter() - began
    failed = [r for r in results if isinstance(r, Exception)]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(paths)} partition states unreadable: {failed[0]!r}")
    return seconds


class FailoverCase:
    """One cluster in its own chroot with its ack brokers; each ``failover`` starts a controller that
    takes over from the one before, and ``result`` summarizes them (the median run is the headline)."""

    def __init__(
        self,
        server: ZooKeeperServer,
        partitions: int,
        brokers: int,
        workdir: Path,
        *,
        tls: MutualTls | None = None,
        timeout: float = 180.0,
        ibp: str | None = None,
    ) -> None:
        """``ibp``: the controller's and the ack brokers' ``inter.broker.protocol.version`` (None: the
        default, 2.3-IV2)."""
        self.security = "plaintext" if tls is None else "ssl"
        self.ibp = ibp or DEFAULT_IBP
        self.name = (
            f"{partitions}-{brokers}"
            + ("" if tls is None else "-ssl")
            + ("" if ibp is None else f"-ibp{ibp}")
        )
        self.connect = f"{server.connect_string}/failover-{self.name}"
        self.cluster = Cluster(partitions, tuple(range(1, brokers + 1)))
        self.workdir = workdir
        self.timeout = timeout
        self.controller_settings: dict[str, Any] = {} if tls is None else dict(tls.controller)
        if ibp is not None:
            self.controller_settings["inter.broker.protocol.version"] = ibp
        self.ack_processes = -(-brokers // BROKERS_PER_ACK_PROCESS)
        self.ack = AckBrokers(
            brokers,
            zookeeper=self.connect,
            processes=self.ack_processes,
            tls=None if tls is None else tls.ack_files,
            ibp=self.ibp,
        )
        self.populated: Populated | None = None
        self.state_read_s: float | None = None
        self.runs: list[dict[str, Any]] = []
        self.warm_runs: list[dict[str, Any]] = []
        self.takeovers = 0
        """Takeovers the ack brokers served (cold, warm, and any another controller made, which its
        caller counts): the request and byte counts of ``result`` are per takeover."""
        self.stats: dict[str, Any] = {}

    @property
    def partitions(self) -> int:
        return self.cluster.partitions

    @property
    def brokers(self) -> int:
        return len(self.cluster.brokers)

    async def start(self) -> None:
        """Populate the chroot, time the floor read, and start the ack brokers (``stop`` them after)."""
        await ensure_chroot(self.connect)
        zk = AsyncZooKeeper(self.connect)
        await zk.start()
        try:
            self.populated = await populate(zk, self.cluster)
            self.state_read_s = await time_state_read(zk, self.cluster)
        finally:
            await zk.close()
        self.ack.start()

    async def failover(self, reelections: int = 0) -> dict[str, Any]:
        """One takeover by a new controller process, until every broker acknowledged it; its figures,
        also kept in ``runs``. Then ``reelections`` warm takeovers by the same process, each started
        by deleting ``/controller`` (the controller resigns and wins again, as Kafka's does), kept in
        ``warm_runs``."""
        run = ControllerRun(
            self.workdir / f"controller-{self.name}-{len(self.runs)}",
            self.connect,
            **self.controller_settings,
        )
        ack_before = self.ack_cpu_seconds()

        async def observe(run: ControllerRun) -> dict[str, Any]:
            elected = run.first("controller_elected")
            assert elected is not None
            observed = await self.acknowledged(answered_requests(run, elected["controller_epoch"]))
            observed["ack_brokers_cpu_s"] = self.ack_cpu_since(ack_before)
            for _ in range(reelections):
                self.warm_runs.append(await self.reelection(run))
            return observed

        record = await one_failover(run, self.brokers, self.timeout, observe)
        self.runs.append(record)
        self.takeovers += 1
        return record

    async def reelection(self, run: ControllerRun) -> dict[str, Any]:
        """Delete ``/controller`` under the running controller and time its takeover again."""
        ack_before, cpu_before = self.ack_cpu_seconds(), cpu_seconds(run.pid)
        stall_before, wall_before = cpu_stall_us(), time.monotonic()
        self.takeovers += 1
        epoch = await reelect(run, self.connect, self.brokers, self.timeout)
        cpu = cpu_seconds(run.pid)
        return {
            **timeline(run, epoch),
            "start_to_elected_s": None,
            **await self.acknowledged(answered_requests(run, epoch)),
            "controller_peak_rss_mib": peak_rss_mib(run.pid),
            "controller_cpu_after_election_s": None
            if cpu is None or cpu_before is None
            else round(cpu - cpu_before, 2),
            "ack_brokers_cpu_s": self.ack_cpu_since(ack_before),
            "cpu_stall_share": stall_share(stall_before, cpu_stall_us(), time.monotonic() - wall_before),
        }

    def ack_cpu_seconds(self) -> float | None:
        """The ack brokers' CPU seconds so far; None with several processes (a supervisor's children
        are not counted in its own)."""
        return cpu_seconds(self.ack.pid) if self.ack_processes == 1 else None

    def ack_cpu_since(self, before: float | None) -> float | None:
        after = self.ack_cpu_seconds() if before is not None else None
        return None if before is None or after is None else round(after - before, 2)

    async def acknowledged(self, sent: Sent) -> dict[str, Any]:
        """The latest takeover as ZooKeeper and the ack brokers saw it (``acknowledged``); ``sent``: the
        controller's own record of the requests of that epoch."""
        epoch, elected_at = await last_election(self.connect)
        progress = await asyncio.to_thread(self.ack.progress)
        return {
            "elected_at": elected_at,
            **acknowledged(progress, epoch, self.cluster.brokers, sent, self.partitions, elected_at),
        }

    def stop(self) -> None:
        """Stop the ack brokers and keep their request and byte counts."""
        self.stats = merge_stats(self.ack.stop())

    def result(self) -> dict[str, Any]:
        runs, stats = self.runs, self.stats
        assert runs and self.populated is not None and self.state_read_s is not None
        headline = sorted(runs, key=lambda r: r["elected_to_last_response_s"])[(len(runs) - 1) // 2]
        takeovers = self.takeovers or len(runs)
        result = {
            "partitions": self.partitions,
            "brokers": self.brokers,
            "security": self.security,
            "inter_broker_protocol_version": self.ibp,
            "ack_processes": self.ack_processes,
            "populate_s": round(self.populated.seconds, 3),
            "znodes": self.populated.znodes,
            "partition_state_read_s": round(self.state_read_s, 3),
            **headline,
            "over_state_read": round(headline["elected_to_last_response_s"] / self.state_read_s, 2),
            "all_elected_to_last_response_s": [r["elected_to_last_response_s"] for r in runs],
            "all_failover_complete_ms": [r["failover_complete_ms"] for r in runs],
            "all_elected_to_last_ack_s": [r["elected_to_last_ack_s"] for r in runs],
            "all_controller_cpu_s": [r["controller_cpu_s"] for r in runs],
            "all_ack_brokers_cpu_s": [r["ack_brokers_cpu_s"] for r in runs],
            "requests_per_failover": {k: v / takeovers for k, v in stats.get("requests", {}).items()},
            "bytes_per_failover": {k: v / takeovers for k, v in stats.get("bytes", {}).items()},
            "total_requests": sum(stats.get("requests", {}).values()) // takeovers,
            "total_bytes": sum(stats.get("bytes", {}).values()) // takeovers,
            "broker_connections": stats.get("connections", 0),
            "broker_tls_connections": stats.get("tls_connections", 0),
        }
        if self.warm_runs:
            result["all_warm_elected_to_last_ack_s"] = [r["elected_to_last_ack_s"] for r in self.warm_runs]
        if self.partitions >= TARGET_PARTITIONS:
            result["target_s"] = TARGET_S
            result["target_met"] = result["elected_to_last_response_s"] <= TARGET_S
        return result


async def run_case(
    server: ZooKeeperServer, partitions: int, brokers: int, workdir: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """One cluster, ``args.runs`` controllers in turn: each takes over from the one before."""
    tls = MutualTls.create(workdir / "tls") if args.security == "ssl" else None
    case = FailoverCase(server, partitions, brokers, workdir, tls=tls, timeout=args.timeout, ibp=args.ibp)
    try:
        await case.start()
        for _ in range(args.runs):
            await case.failover(args.reelections)
    finally:
        case.stop()
    return case.result()


async def run_all(server: ZooKeeperServer, args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    results = []
    for brokers in args.broker_counts:
        for partitions in args.partition_counts:
            print(f"{partitions} partitions over {brokers} brokers: running", flush=True)
            r = await run_case(server, partitions, brokers, workdir, args)
            print(
                f"  elected -> last ack {r['all_elected_to_last_response_s']} s, "
                f"failover_complete {r['all_failover_complete_ms']} ms, "
                f"CPU {r['all_controller_cpu_s']} s, peak RSS {r['controller_peak_rss_mib']} MiB",
                flush=True,
            )
            results.append(r)
    return results


def print_table(results: list[dict[str, Any]]) -> None:
    columns = (
        "brokers",
        "elect->ack s",
        "floor s",
        "complete ms",
        "CPU s",
        "CPU stall",
        "requests",
        "MB",
        "peak MiB",
    )
    print(f"{'partitions':>10}" + "".join(f"{c:>14}" for c in columns))
    for r in results:
        cells = (
            r["brokers"],
            f"{r['elected_to_last_response_s']:.2f}",
            f"{r['partition_state_read_s']:.2f}",
            f"{r['failover_complete_ms']:.0f}",
            r["controller_cpu_s"],
            r["cpu_stall_share"],
            r["total_requests"],
            f"{r['total_bytes'] / 1e6:.1f}",
            r["controller_peak_rss_mib"],
        )
        print(f"{r['partitions']:>10}" + "".join(f"{c:>14}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", default="10000,50000,100000", help="comma-separated")
    parser.add_argument("--brokers", default="3,200", help="comma-separated")
    parser.add_argument("--runs", type=int, default=3, help="failovers per case; the median is reported")
    parser.add_argument(
        "--quick", action="store_true", help="one failover of 10,000 partitions over 3 brokers"
    )
    parser.add_argument(
        "--security",
        choices=SECURITY,
        default="plaintext",
        help="ssl: mutual TLS between the controller and the brokers (bench.tls compares both in one run)",
    )
    parser.add_argument(
        "--reelections",
        type=int,
        default=0,
        help="after each takeover, this many warm ones by the same process (deleting /controller)",
    )
    parser.add_argument(
        "--ibp",
        default=None,
        help="inter.broker.protocol.version of the controller and the ack brokers (default 2.3-IV2; "
        "3.9: Kafka 3.9's wire, as bench.kafka_anchor runs it)",
    )
    parser.add_argument("--heap", default="2g", help="the ZooKeeper JVM's -Xmx (every case stays in it)")
    parser.add_argument("--timeout", type=float, default=180, help="seconds to wait for one failover")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "failover.json"
    )
    args = parser.parse_args()
    if args.quick:
        args.partitions, args.brokers, args.runs = "10000", "3", 1
    args.partition_counts = [int(p) for p in args.partitions.split(",")]
    args.broker_counts = [int(b) for b in args.brokers.split(",")]

    with zookeeper_workdir("failover-bench-", args.heap) as (server, workdir):
        results = asyncio.run(run_all(server, args, workdir))
    print()
    print_table(results)
    report = {
        "benchmark": "failover",
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.failover", *sys.argv[1:]]),
        "zookeeper_heap": args.heap,
        "runs_per_case": args.runs,
        "security": args.security,
        "inter_broker_protocol_version": args.ibp or DEFAULT_IBP,
        "replication_factor": 3,
        "target": {"partitions": TARGET_PARTITIONS, "elected_to_last_response_s_at_most": TARGET_S},
        "results": results,
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()
