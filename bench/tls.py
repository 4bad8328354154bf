"""What TLS costs the control plane: PLAINTEXT beside mutual TLS (SSL), ratios from one run.

Both modes run in the same process against the same ZooKeeper, interleaved, so that the ratios
SSL / PLAINTEXT hold even when other work shares the machine. SSL is the secure layout's mutual TLS
(``cluster.secure``'s CA and certificates, ``ssl.client.auth=required``), without its ACLs and
ZooKeeper ACLs, so only TLS is measured; ZooKeeper itself is not encrypted in either mode.

* Failover (``bench.failover``'s ``FailoverCase``): for each ``--partitions`` count, one cluster per
  mode in its own chroot (RF 3 over ``--brokers`` ack brokers, ``bench.ack_brokers``), and ``--runs``
  controller takeovers per mode, alternating PLAINTEXT-SSL, SSL-PLAINTEXT, ... The figure is
  ``bench.failover``'s: from the election to the last broker's acknowledgement (median). With SSL the
  ack brokers serve TLS requiring client certificates and register their listeners as SSL in
  ``listener_security_protocol_map``, so the controller dials them over TLS with its certificate.
  Floor: one multi-read of every partition-state znode, which any takeover must do.
* Control latency (KIP-291, ``bench.control_latency``'s broker, probe and load): one real broker per
  mode (its own chroot, both running throughout), whose CONTROLLER listener is PLAINTEXT or SSL with
  client certificates required. The benchmark plays the controller over one persistent connection,
  alternating between the brokers where it can: ``--bulk-repeats`` full UpdateMetadata of
  ``--latency-partitions`` over 50 brokers (encoded once: a bulk transfer, as in a failover); new
  connections (TCP and TLS handshakes plus a first small UpdateMetadata: what a controller pays per
  broker after a reconnect); then LeaderAndIsr and small UpdateMetadata one at a time every
  ``--interval-ms`` for ``--duration`` seconds, idle and (unless ``--no-load``) with the data plane
  flooded by ``bench.control_latency``'s load generator. Round trips, and the broker's own queue and
  handle times per request (its events), so that the cost of TLS shows as the part outside the
  handler. Floor: the broker's queue + handle time.

Results go to bench/results/tls.json (``ratios`` holds every SSL / PLAINTEXT figure) and a table on
stdout.

    .venv/bin/python -m bench.tls [--partitions 10000,100000] [--brokers 3] [--runs 3]
        [--latency-partitions 20000] [--bulk-repeats 10] [--duration 10] [--no-load] [--no-latency]
        [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench.codec import topic_states
from bench.control_broker import BrokerRun, Scrapes, wait_saturated
from bench.control_load import PRODUCE_BATCHES, LoadGenerator
from bench.control_phases import attach_broker_times, measure_phase, report_phase
from bench.control_requests import ProbeRequests, Sample, live_brokers, update_metadata
from bench.control_settings import (
    BROKER_ID,
    CONTROLLER_EPOCH,
    CONTROLLER_ID,
    PROBE_TIMEOUT_S,
    UPDATE_METADATA_VERSION,
    Settings,
)
from bench.failover import FailoverCase, MutualTls
from bench.machine import machine, write_report
from bench.measure import ratio, summary
from bench.zk_populate import ensure_chroot
from bench.zookeeper import zookeeper_workdir
from controller.request_batch import SECURITY_PROTOCOL_IDS
from network.connection import KafkaConnection
from protocol import ApiKey, ErrorCode
from protocol.registry import message_codec
from security.config import ClientSecurity
from zkserver.server import ZooKeeperServer
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.election import try_elect

MODES = ("plaintext", "ssl")
NEW_CONNECTIONS = 20
"""Fresh connections timed per mode (handshakes plus a first request)."""

Report = dict[str, Any]


def interleaved(runs: int) -> list[str]:
    """PLAINTEXT, SSL, then SSL, PLAINTEXT, ...: neither mode always goes first."""
    order: list[str] = []
    for i in range(runs):
        order += MODES if i % 2 == 0 else MODES[::-1]
    return order


# -- failover


def median(runs: list[Report], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 3) if values else None


async def failover_pair(
    server: ZooKeeperServer, partitions: int, args: argparse.Namespace, workdir: Path, tls: MutualTls
) -> Report:
    """``args.runs`` takeovers per mode, alternating, each mode on its own copy of the cluster."""
    cases = {
        mode: FailoverCase(
            server,
            partitions,
            args.brokers,
            workdir,
            tls=tls if mode == "ssl" else None,
            timeout=args.timeout,
        )
        for mode in MODES
    }
    try:
        for case in cases.values():
            await case.start()
        for mode in interleaved(args.runs):
            run = await cases[mode].failover()
            print(f"  {mode:<9} elected -> last ack {run['elected_to_last_response_s']:.2f} s", flush=True)
    finally:
        for case in cases.values():
            case.stop()
    plain, ssl = (cases[mode].result() for mode in MODES)
    medians = {
        key: (median(cases["plaintext"].runs, key), median(cases["ssl"].runs, key))
        for key in ("elected_to_last_response_s", "controller_cpu_s", "ack_brokers_cpu_s")
    }
    return {
        "partitions": partitions,
        "brokers": args.brokers,
        "plaintext": plain,
        "ssl": ssl,
        "medians": {key: {"plaintext": p, "ssl": s} for key, (p, s) in medians.items()},
        "ssl_over_plaintext": {
            **{key: ratio(s, p) for key, (p, s) in medians.items()},
            "total_bytes": ratio(ssl["total_bytes"], plain["total_bytes"]),
        },
        "floor_partition_state_read_s": min(plain["partition_state_read_s"], ssl["partition_state_read_s"]),
    }


# -- control latency


class ControlPlaneBroker(BrokerRun):
    """``bench.control_latency``'s broker with a dedicated control plane; with ``tls`` its CONTROLLER
    listener serves mutual TLS (the data plane, where the load arrives, stays PLAINTEXT)."""

    def __init__(
        self, mode: str, workdir: Path, zookeeper: str, settings: Settings, tls: MutualTls | None
    ) -> None:
        directory = workdir / mode
        directory.mkdir(parents=True, exist_ok=True)
        super().__init__("dedicated", directory, zookeeper, settings)
        self.security = mode
        if tls is not None:
            self.properties |= {
                **tls.broker,
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
            }
            self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))

    def live_brokers(self, count: int) -> list[dict[str, Any]]:
        """The UpdateMetadata broker list, this broker's CONTROLLER endpoint with its real protocol."""
        brokers = live_brokers(count, self.endpoints())
        protocol = SECURITY_PROTOCOL_IDS[self.security.upper()]
        for endpoint in brokers[BROKER_ID]["endpoints"]:
            if endpoint["listener"] == "CONTROLLER":
                endpoint["security_protocol"] = protocol
        return brokers


@contextlib.asynccontextmanager
async def elected(root: str, chroot: str) -> AsyncIterator[str]:
    """``root/chroot`` with this process as its controller (epoch 1), for as long as the context lasts:
    the broker then confirms the probe's controller epoch there, as it would a real controller's."""
    connect = f"{root}/{chroot}"
    await ensure_chroot(connect)
    zk = AsyncZooKeeper(connect)
    await zk.start()
    try:
        registration = znodes.ControllerRegistration(CONTROLLER_ID, int(time.time() * 1000))
        token = await try_elect(zk, CONTROLLER_ID, registration.encode())
        if token is None or token.epoch != CONTROLLER_EPOCH:
            raise RuntimeError(f"could not become controller of {connect} with epoch {CONTROLLER_EPOCH}")
        yield connect
    finally:
        await zk.close()


class Probe:
    """One broker under test and the benchmark's persistent control connection to it."""

    def __init__(
        self, broker: ControlPlaneBroker, security: ClientSecurity | None, settings: Settings
    ) -> None:
        self.broker = broker
        self.security = security
        self.settings = settings
        self.connection: KafkaConnection | None = None
        self.requests: ProbeRequests | None = None
        self.big = b""
        """The full UpdateMetadata, encoded once: timing it measures transfer and broker, not encoding."""
        self.small: dict[str, Any] = {}
        self.bulk_samples: list[Sample] = []
        self.connect_ms: list[float] = []
        self.slices: dict[str, list[Report]] = {}
        self.figures: Report = {"mode": broker.security}

    async def open(self) -> KafkaConnection:
        host, port = self.broker.endpoints()["CONTROLLER"]
        return await KafkaConnection.open(
            host, port, client_id=f"controller-{CONTROLLER_ID}", connect_timeout=10, security=self.security
        )

    async def start(self) -> None:
        """Start the broker, connect, and fill its metadata cache with the full UpdateMetadata."""
        self.broker.start()
        await self.broker.wait_started()
        self.connection = await self.open()
        brokers = self.broker.live_brokers(self.settings.brokers)
        states = topic_states(
            self.settings.partitions, self.settings.brokers, {"zk_version": 0, "offline_replicas": []}
        )
        codec = message_codec(ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, "request")
        self.big = codec.encode(update_metadata(states, brokers, self.broker.epoch))
        self.figures["update_metadata_bytes"] = len(self.big)
        began = time.perf_counter()
        await self.send(self.connection, self.big)
        self.figures["warm_up_update_metadata_ms"] = round((time.perf_counter() - began) * 1000, 1)
        first = states[0]
        self.small = update_metadata(
            [{"topic_name": first["topic_name"], "partition_states": first["partition_states"][:1]}],
            brokers,
            self.broker.epoch,
        )
        self.requests = ProbeRequests(self.small, self.broker.endpoints()["PLAINTEXT"], self.broker.epoch)

    async def send(self, connection: KafkaConnection, body: dict[str, Any] | bytes) -> int:
        """One UpdateMetadata, answered without error; its correlation id."""
        correlation_id, response = await connection.send(
            ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, body, timeout=PROBE_TIMEOUT_S
        )
        if response["error_code"]:
            raise RuntimeError(f"UpdateMetadata failed: {ErrorCode.name_of(response['error_code'])}")
        return correlation_id

    async def bulk(self) -> None:
        """The full UpdateMetadata again over the persistent connection (the cache keeps its size)."""
        assert self.connection is not None
        began = time.perf_counter()
        correlation_id = await self.send(self.connection, self.big)
        elapsed_ms = (time.perf_counter() - began) * 1000
        self.bulk_samples.append(Sample(ApiKey.UPDATE_METADATA.name, correlation_id, elapsed_ms, "NONE"))

    async def new_connection(self) -> None:
        """Connect (TCP, then TLS with both certificates) and send one small UpdateMetadata: what the
        controller pays per broker when it (re)connects."""
        began = time.perf_counter()
        connection = await self.open()
        try:
            await self.send(connection, self.small)
            self.connect_ms.append((time.perf_counter() - began) * 1000)
        finally:
            await connection.close()

    async def phase_slice(self, name: str, seconds: float, loaded: bool) -> None:
        """``seconds`` of probing, idle or with the data plane (PLAINTEXT listener) flooded: the load
        starts and fills the data-plane queue first, and stops afterwards."""
        assert self.connection is not None and self.requests is not None
        print(f"{self.broker.security}: {name} probe for {seconds:.1f} s", flush=True)
        settings = replace(self.settings, duration_s=seconds)
        load = LoadGenerator(*self.broker.endpoints()["PLAINTEXT"], settings) if loaded else None
        try:
            if load is not None:
                await load.start()
                await wait_saturated(
                    self.broker.metrics_port, settings.queued_max_requests, settings.saturation_timeout_s
                )
            part = await measure_phase(name, self.broker, self.connection, self.requests, settings, load)
        finally:
            if load is not None:
                load.stop()
        self.slices.setdefault(name, []).append(part)

    async def stop(self) -> Report:
        """Close, stop the broker, and match the probes with the broker's queue and handle times."""
        if self.connection is not None:
            await self.connection.close()
        self.figures["broker_exit_code"] = self.broker.stop()
        phases = [merge_slices(name, parts) for name, parts in self.slices.items()]
        bulk: Report = {"phase": "bulk", "samples": self.bulk_samples}
        self.figures["events_missing"] = attach_broker_times([*phases, bulk], self.broker.events())
        self.figures["new_connection_first_response_ms"] = summary(self.connect_ms)
        self.figures["bulk_update_metadata"] = timed_summaries(self.bulk_samples)
        self.figures["phases"] = {
            p["phase"]: report_phase(p, self.settings.queued_max_requests, True) for p in phases
        }
        return self.figures


def pool_scrapes(parts: list[Scrapes]) -> Scrapes:
    pooled = Scrapes()
    for part in parts:
        pooled.queue_size += part.queue_size
        pooled.data_idle += part.data_idle
        pooled.control_idle += part.control_idle
    return pooled


def merge_slices(name: str, parts: list[Report]) -> Report:
    """One phase out of its slices (``measure_phase`` results): samples and scrapes pooled, counts
    summed, rates over the total time, CPU shares weighted by each slice's length."""
    seconds = sum(p["seconds"] for p in parts)
    merged: Report = {
        "phase": name,
        "slices": len(parts),
        "seconds": round(seconds, 2),
        "samples": [sample for p in parts for sample in p["samples"]],
        "scrapes": pool_scrapes([p["scrapes"] for p in parts]),
        "load_average": parts[-1]["load_average"],
    }
    for key in ("metadata_requests", "produce_requests", "load_failures"):
        merged[key] = sum(p[key] for p in parts)
    merged["metadata_per_s"] = round(merged["metadata_requests"] / seconds, 1)
    merged["produce_per_s"] = round(merged["produce_requests"] / seconds, 1)
    merged["records_per_s"] = round(merged["produce_requests"] * PRODUCE_BATCHES / seconds)
    cores: dict[str, float | None] = {}
    for key in parts[0]["cpu_cores"]:
        shares = [(p["cpu_cores"][key], p["seconds"]) for p in parts]
        unknown = None in (share for share, _ in shares)
        cores[key] = None if unknown else round(sum(share * t for share, t in shares) / seconds, 2)
    merged["cpu_cores"] = cores
    return merged


def timed_summaries(samples: list[Sample]) -> Report:
    """Round trip, the broker's queue + handle time, and the rest (transfer, TLS), as summaries."""
    timed = [
        (s.round_trip_ms, s.queue_ms + s.handle_ms)
        for s in samples
        if s.queue_ms is not None and s.handle_ms is not None
    ]
    return {
        "round_trip_ms": summary([s.round_trip_ms for s in samples]),
        "broker_total_ms": summary([broker for _, broker in timed]),
        "outside_handler_ms": summary([rtt - broker for rtt, broker in timed]),
    }


async def control_latency(
    root: str, workdir: Path, settings: Settings, tls: MutualTls, load: bool, bulk_repeats: int, slices: int
) -> dict[str, Report]:
    """Both brokers up at once; the modes take turns at every step (PLAINTEXT, SSL, SSL, PLAINTEXT, ...),
    each phase of ``settings.duration_s`` in ``slices`` turns per mode."""
    async with elected(root, "latency-plaintext") as plain_zk, elected(root, "latency-ssl") as ssl_zk:
        probes = {
            "plaintext": Probe(
                ControlPlaneBroker("plaintext", workdir, plain_zk, settings, None), None, settings
            ),
            "ssl": Probe(
                ControlPlaneBroker("ssl", workdir, ssl_zk, settings, tls), tls.controller_client(), settings
            ),
        }
        try:
            for probe in probes.values():
                await probe.start()
            for mode in interleaved(bulk_repeats):
                await probes[mode].bulk()
            for mode in interleaved(NEW_CONNECTIONS):
                await probes[mode].new_connection()
            for name in ("idle", "loaded") if load else ("idle",):
                for mode in interleaved(slices):
                    await probes[mode].phase_slice(name, settings.duration_s / slices, name == "loaded")
        finally:
            results = {mode: await probe.stop() for mode, probe in probes.items()}
    return results


def latency_ratios(modes: dict[str, Report]) -> Report:
    plain, ssl = modes["plaintext"], modes["ssl"]
    ratios: Report = {
        "bulk_update_metadata_p50": ratio(
            ssl["bulk_update_metadata"]["round_trip_ms"]["p50"],
            plain["bulk_update_metadata"]["round_trip_ms"]["p50"],
        ),
        "bulk_update_metadata_outside_handler_p50": ratio(
            ssl["bulk_update_metadata"]["outside_handler_ms"]["p50"],
            plain["bulk_update_metadata"]["outside_handler_ms"]["p50"],
        ),
        "new_connection_first_response_p50": ratio(
            ssl["new_connection_first_response_ms"]["p50"], plain["new_connection_first_response_ms"]["p50"]
        ),
    }
    for phase in plain["phases"]:
        p, s = plain["phases"][phase], ssl["phases"][phase]
        for figure in ("round_trip_ms", "broker_handle_ms", "outside_handler_ms"):
            for q in ("p50", "p99"):
                ratios[f"{phase}_{figure.removesuffix('_ms')}_{q}"] = ratio(s[figure][q], p[figure][q])
    return ratios


# -- output


def rows(failovers: list[Report], latency: dict[str, Report]) -> list[tuple[str, Any, Any, Any, Any]]:
    """(figure, PLAINTEXT, SSL, SSL / PLAINTEXT, floor) per line of the table."""
    lines: list[tuple[str, Any, Any, Any, Any]] = []
    for f in failovers:
        m, r = f["medians"], f["ssl_over_plaintext"]
        name = f"failover {f['partitions']} partitions, {f['brokers']} brokers"
        lines.append(
            (
                f"{name}: elected->last ack s",
                m["elected_to_last_response_s"]["plaintext"],
                m["elected_to_last_response_s"]["ssl"],
                r["elected_to_last_response_s"],
                f["floor_partition_state_read_s"],
            )
        )
        for key, label in (
            ("controller_cpu_s", "controller CPU s"),
            ("ack_brokers_cpu_s", "ack brokers CPU s"),
        ):
            lines.append((f"{name}: {label}", m[key]["plaintext"], m[key]["ssl"], r[key], None))
        stall = (f["plaintext"]["cpu_stall_share"], f["ssl"]["cpu_stall_share"])
        lines.append((f"{name}: CPU stall share", *stall, None, None))
    if not latency:
        return lines
    plain, ssl = latency["plaintext"], latency["ssl"]
    pb, sb = plain["bulk_update_metadata"], ssl["bulk_update_metadata"]
    mb = plain["update_metadata_bytes"] / 1e6
    a, b = pb["round_trip_ms"]["p50"], sb["round_trip_ms"]["p50"]
    floor = pb["broker_total_ms"]["p50"]
    lines.append((f"control: UpdateMetadata of {mb:.1f} MB p50 ms", a, b, ratio(b, a), floor))
    a, b = pb["outside_handler_ms"]["p50"], sb["outside_handler_ms"]["p50"]
    lines.append(("control: its part outside the handler p50 ms", a, b, ratio(b, a), None))
    p, s = plain["new_connection_first_response_ms"]["p50"], ssl["new_connection_first_response_ms"]["p50"]
    lines.append(("control: new connection + first response p50 ms", p, s, ratio(s, p), None))
    for phase, pp in plain["phases"].items():
        sp = ssl["phases"][phase]
        for q in ("p50", "p99"):
            # The floor of a round trip: the broker's own queue and handle time, which TLS leaves alone.
            a, b = pp["round_trip_ms"][q], sp["round_trip_ms"][q]
            lines.append((f"control {phase}: round trip {q} ms", a, b, ratio(b, a), pp["broker_total_ms"][q]))
            a, b = pp["outside_handler_ms"][q], sp["outside_handler_ms"][q]
            lines.append((f"control {phase}: outside the handler {q} ms", a, b, ratio(b, a), None))
        others = (pp["cpu_cores"]["other"], sp["cpu_cores"]["other"])
        lines.append((f"control {phase}: cores used by other work", *others, None, None))
    return lines


def table(lines: list[tuple[str, Any, Any, Any, Any]]) -> str:
    def cell(value: Any) -> str:
        if value is None:
            return f"{'-':>10}"
        return f"{value:>10.3f}" if isinstance(value, float) else f"{value:>10}"

    head = f"{'figure':<58}{'plaintext':>10}{'ssl':>10}{'ssl/plain':>10}{'floor':>10}"
    body = [f"{name:<58}" + "".join(cell(v) for v in values) for name, *values in lines]
    return "\n".join([head, "-" * len(head), *body])


def flat_ratios(failovers: list[Report], latency_ratio: Report) -> Report:
    flat: Report = {}
    for f in failovers:
        for key, value in f["ssl_over_plaintext"].items():
            flat[f"failover_{f['partitions']}_{key}"] = value
    flat |= {f"control_{key}": value for key, value in latency_ratio.items()}
    return flat


# -- command line


def latency_settings(args: argparse.Namespace) -> Settings:
    return Settings(
        partitions=args.latency_partitions,
        brokers=50,
        io_threads=2,
        queued_max_requests=50,
        connections=64,
        pipeline_depth=3,
        load_processes=1,
        produce_connections=32,
        interval_ms=args.interval_ms,
        duration_s=args.duration,
        saturation_timeout_s=60.0,
        switch_interval_ms=None,
    )


async def run_all(server: ZooKeeperServer, workdir: Path, args: argparse.Namespace) -> Report:
    tls = MutualTls.create(workdir / "tls")
    failovers = []
    for partitions in args.partition_counts:
        print(f"failover: {partitions} partitions over {args.brokers} brokers", flush=True)
        failovers.append(await failover_pair(server, partitions, args, workdir, tls))
    settings = latency_settings(args)
    latency = {}
    if not args.no_latency:
        latency = await control_latency(
            server.connect_string, workdir, settings, tls, not args.no_load, args.bulk_repeats, args.slices
        )
    return {"failover": failovers, "control_latency": latency, "latency_settings": settings}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tls", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", default="10000,100000", help="failover cases, comma-separated")
    parser.add_argument("--brokers", type=int, default=3, help="ack brokers in every failover case")
    parser.add_argument("--runs", type=int, default=3, help="takeovers per mode and case (median reported)")
    parser.add_argument("--timeout", type=float, default=180, help="seconds to wait for one failover")
    parser.add_argument(
        "--latency-partitions", type=int, default=20_000, help="in the full UpdateMetadata (50 brokers)"
    )
    parser.add_argument(
        "--bulk-repeats", type=int, default=10, help="full UpdateMetadata round trips timed per mode"
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of control probing per phase")
    parser.add_argument("--interval-ms", type=float, default=50.0, help="time between control requests")
    parser.add_argument(
        "--slices", type=int, default=2, help="turns per mode each phase is split into (modes alternate)"
    )
    parser.add_argument("--no-load", action="store_true", help="probe the control plane idle only")
    parser.add_argument("--no-latency", action="store_true", help="failover only")
    parser.add_argument("--heap", default="2g", help="the ZooKeeper JVM's -Xmx")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run in seconds: 1,000 partitions, one takeover per mode, 1 s of idle probing each",
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "tls.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.partitions, args.runs, args.latency_partitions = "1000", 1, 1000
        args.duration, args.no_load, args.bulk_repeats, args.slices = 1.0, True, 2, 1
    args.partition_counts = [int(p) for p in args.partitions.split(",") if p]
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    load_before = os.getloadavg()
    with zookeeper_workdir("tls-bench-", args.heap) as (server, workdir):
        outcome = asyncio.run(run_all(server, workdir, args))
    failovers, latency = outcome["failover"], outcome["control_latency"]
    print()
    print(table(rows(failovers, latency)))
    report = {
        "benchmark": "tls",
        "machine": machine(),
        "command": " ".join(
            [Path(sys.executable).name, "-m", "bench.tls", *(sys.argv[1:] if argv is None else argv)]
        ),
        "load_average": {
            "before": [round(v, 2) for v in load_before],
            "after": [round(v, 2) for v in os.getloadavg()],
        },
        "settings": {
            "partitions": args.partition_counts,
            "brokers": args.brokers,
            "runs_per_mode": args.runs,
            "ssl": "mutual TLS (ssl.client.auth=required), cluster.secure's certificates (EC P-256); "
            "ZooKeeper plain in both modes",
            "latency": {
                **asdict(outcome["latency_settings"]),
                "load": not args.no_load,
                "slices_per_mode": args.slices,
                "bulk_repeats": args.bulk_repeats,
                "new_connections": NEW_CONNECTIONS,
            },
        },
        "ratios": flat_ratios(failovers, latency_ratios(latency) if latency else {}),
        "failover": failovers,
        "control_latency": latency,
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()
