"""KIP-291 on Apache Kafka's broker and on ours: control-request latency under a saturated data plane.

``bench.control_latency`` asks whether a dedicated control plane keeps control requests prompt while
clients flood our broker. This asks the same of a real Apache Kafka 3.9 broker (ZooKeeper mode,
``kafka-server-start.sh``'s JVM options and heap, stock log levels) with the same probe and the same
load generator, in one run, so that each figure of ours stands beside Kafka's from the same machine
and hour.

One ZooKeeper; for each implementation and mode (Kafka dedicated, ours dedicated, Kafka shared, ours
shared) its own chroot and a fresh broker, id 1:

* dedicated: PLAINTEXT and CONTROLLER listeners, ``control.plane.listener.name=CONTROLLER``;
* shared: PLAINTEXT only, so control requests queue behind client requests (Kafka before KIP-291).

Both brokers run at ``inter.broker.protocol.version=3.9`` and take the same bytes: LeaderAndIsr v7 and
UpdateMetadata v8 in Kafka's layouts (``protocol.ibp.control_wire("3.9")``), ``num.io.threads`` and
``queued.max.requests`` as given, everything else at each implementation's defaults.

The benchmark plays the controller. Before a broker starts, it wins ``/controller`` in the chroot
with its own ZooKeeper session (controller 1001, ``/controller_epoch`` 1), so Kafka's KafkaController
finds the seat taken and stays passive; then each request carries that controller epoch and the
broker's real epoch (the czxid of its ``/brokers/ids/1``), which both brokers check
(``bench.kafka_control_targets`` holds the two brokers). A warm-up UpdateMetadata of ``--partitions``
partitions over ``--brokers`` live brokers (and the probe partition: Kafka takes Produce only for
partitions its metadata cache knows) makes a Metadata request for all topics cost real handler time.
Then one control request every ``--interval-ms`` on the control listener, one at a time as a
controller sends them, alternating LeaderAndIsr of the probe partition (leader epoch rising: each one
a become-leader transition) and the UpdateMetadata of that partition that follows a leader change:
``--warm-up`` seconds unmeasured (the first log, Kafka's JIT), then measured with the broker idle,
then while ``bench.control_load`` keeps the data-plane queue full: pipelined Metadata v1 for all
topics and, on half the connections, Produce v7 (acks=1, one batch of 200 records of 100 bytes: Kafka
refuses more than one batch per partition) to the probe partition. The queue is watched on our
broker's metrics port and on Kafka's JMX (``kafka-jmx``, Kafka's own JmxTool): the same gauge,
``RequestChannel`` ``RequestQueueSize``. A load that cannot fill a broker's queue within
``--saturation-timeout`` is recorded (``saturated``: false), not an error.

Accepted means: every probe answered NONE (the partition errors of LeaderAndIsr included), and each
broker's own record of it: our ``control_request_handled`` events (error NONE, matched by correlation
id), Kafka's state-change log (``Finished LeaderAndIsr request in N ms correlationId C from controller
1001`` and ``... in response to UpdateMetadata request sent by controller 1001 epoch 1 with correlation
id C``), with no WARN or ERROR line from its state-change logger. The Produce load counts its answered
requests; at the end the probe partition's log end offset (ListOffsets) shows the records appended.

Reported per implementation: idle p99, loaded p99 with a dedicated and with a shared control plane,
loaded/idle and shared/dedicated, and ours/Kafka for each; per phase p50/p99/max round trips, Metadata
and Produce requests served per second, the queue's fill and the cores used by the broker, the load
generator and everything else on the machine (other people's tests and benchmarks skew every figure;
the run's CPU pressure stall share is recorded). Kafka's jars come from ``make kafka``. Results go to
bench/results/kafka_control_latency.json and a table on stdout.

    .venv/bin/python -m bench.kafka_control_latency [--duration 30] [--warm-up 10] [--quick]
        [--partitions 20000] [--brokers 50] [--connections 64] [--workdir DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.codec import topic_states
from bench.control_load import PRODUCE_BATCHES, LoadGenerator
from bench.control_phases import API_NAMES, cpu_now, cpu_shares, probe_sampling
from bench.control_requests import (
    ProbeRequests,
    Sample,
    elect,
    live_brokers,
    probe,
    probe_partition,
    response_error,
    update_metadata,
)
from bench.control_settings import (
    BROKER_ID,
    CONTROLLER_ID,
    PROBE_TIMEOUT_S,
    PROBE_TOPIC,
    Settings,
    add_probe_options,
    probe_settings,
)
from bench.kafka_control_targets import IBP, SCRAPE_INTERVAL_S, Target, make_target
from bench.kafka_peer import MachineLoad, cell, chroot, end_offset, figure_table, report_head
from bench.machine import write_report
from bench.measure import ratio, summary
from bench.zookeeper import zookeeper_workdir
from kafkapeer.jars import BROKER, classpath
from network.connection import KafkaConnection
from protocol import ApiKey
from protocol.ibp import control_wire
from zkstore.aio import AsyncZooKeeper

IMPLEMENTATIONS = ("kafka", "ours")
MODES = ("dedicated", "shared")
WIRE = control_wire(IBP)
"""LeaderAndIsr v7 and UpdateMetadata v8 in Kafka's layouts, to both brokers."""


# -- the requests, in Kafka 3.9's layouts


def probe_topic_state(leader_epoch: int) -> dict[str, Any]:
    """UpdateMetadata's view of the probe partition: led by the broker under test at ``leader_epoch``
    (Kafka accepts Produce only for partitions its metadata cache knows)."""
    state = {
        **probe_partition(leader_epoch),
        "zk_version": leader_epoch,
        "replicas": [BROKER_ID],
        "offline_replicas": [],
    }
    return {"topic_name": PROBE_TOPIC, "partition_states": [state]}


class KafkaWireProbe(ProbeRequests):
    """``bench.control_requests``' alternation in Kafka 3.9's versions and layouts: a LeaderAndIsr of the
    probe partition with a newer leader epoch, then the UpdateMetadata of that partition every broker
    gets after a leader change (with every live broker)."""

    def __init__(self, brokers: list[dict[str, Any]], leader: tuple[str, int], broker_epoch: int) -> None:
        first = update_metadata([probe_topic_state(0)], brokers, broker_epoch, WIRE)
        super().__init__(first, leader, broker_epoch, WIRE)
        self.brokers = brokers

    def update(self) -> dict[str, Any]:
        announced = max(0, self.leader_epoch - 1)
        return update_metadata([probe_topic_state(announced)], self.brokers, self.broker_epoch, self.wire)


# -- one phase


async def sample_queue(target: Target, into: list[float]) -> None:
    """The data-plane queue's size every ``SCRAPE_INTERVAL_S`` into ``into`` until cancelled."""
    while True:
        size = await asyncio.to_thread(target.queue_size)
        if size is not None:
            into.append(size)
        await asyncio.sleep(SCRAPE_INTERVAL_S)


async def measure_phase(
    name: str,
    target: Target,
    connection: KafkaConnection,
    requests: ProbeRequests,
    settings: Settings,
    load: LoadGenerator | None,
) -> dict[str, Any]:
    sizes: list[float] = []
    cpu_before, began = cpu_now(target.pid, load, target.helper_cpu_seconds()), time.monotonic()
    metadata_before, produce_before = (load.completed, load.produced) if load else (0, 0)
    samples = await probe_sampling(sample_queue(target, sizes), connection, requests, settings)
    elapsed = time.monotonic() - began
    metadata = (load.completed if load else 0) - metadata_before
    produced = (load.produced if load else 0) - produce_before
    return {
        "phase": name,
        "seconds": round(elapsed, 2),
        "samples": samples,
        "metadata_per_s": round(metadata / elapsed, 1),
        "produce_per_s": round(produced / elapsed, 1),
        "records_per_s": round(produced * PRODUCE_BATCHES / elapsed),
        "load_failures": load.failures if load else 0,
        "cpu_cores": cpu_shares(cpu_before, cpu_now(target.pid, load, target.helper_cpu_seconds()), elapsed),
        "queue_sizes": sizes,
    }


def report_phase(phase: dict[str, Any], capacity: int) -> dict[str, Any]:
    samples: list[Sample] = phase.pop("samples")
    sizes: list[float] = phase.pop("queue_sizes")
    errors: dict[str, int] = {}
    for s in samples:
        errors[s.error] = errors.get(s.error, 0) + 1
    return {
        **phase,
        "probes": len(samples),
        "responses": errors,
        "round_trip_ms": summary([s.round_trip_ms for s in samples]),
        "round_trip_ms_by_api": {
            API_NAMES[api]: summary([s.round_trip_ms for s in samples if s.api == api]) for api in API_NAMES
        },
        # The broker's own record: ours, the queue and handle times of each probe; Kafka, LeaderAndIsr's
        # handling in its ReplicaManager (whole ms). LeaderAndIsr's is the figure both give.
        "broker_queue_ms": summary([s.queue_ms for s in samples if s.queue_ms is not None]),
        "leader_and_isr_handle_ms": summary(
            [s.handle_ms for s in samples if s.handle_ms is not None and s.api == ApiKey.LEADER_AND_ISR.name]
        ),
        "data_queue_size": {
            "scrapes": len(sizes),
            "mean": round(sum(sizes) / len(sizes), 1) if sizes else None,
            "max": max(sizes, default=None),
            "full_share": round(sum(s >= capacity for s in sizes) / len(sizes), 2) if sizes else None,
        },
    }


# -- one broker


async def wait_saturated(target: Target, capacity: int, timeout: float) -> dict[str, Any]:
    """Until the data-plane queue has read full (within 5%) on five samples in a row; whether it did
    within ``timeout`` (a load that cannot fill a faster broker's queue is a finding, not a failure)."""
    began = time.monotonic()
    run = 0
    seen: list[float] = []
    while run < 5 and time.monotonic() - began < timeout:
        size = await asyncio.to_thread(target.queue_size)
        if size is not None:
            seen.append(size)
            run = run + 1 if size >= 0.95 * capacity else 0
        await asyncio.sleep(SCRAPE_INTERVAL_S)
    return {
        "saturated": run >= 5,
        "seconds": round(time.monotonic() - began, 2),
        "queue_sizes_seen": seen[-20:],
    }


async def warm_up(target: Target, connection: KafkaConnection, settings: Settings) -> dict[str, Any]:
    """The big UpdateMetadata (``--partitions`` and the probe partition); the live brokers it named, and
    how long it took."""
    brokers = live_brokers(settings.brokers, target.endpoints)
    states = topic_states(settings.partitions, settings.brokers, {"zk_version": 0, "offline_replicas": []})
    began = time.perf_counter()
    _, response = await connection.send(
        ApiKey.UPDATE_METADATA,
        WIRE.update_metadata,
        update_metadata([*states, probe_topic_state(0)], brokers, target.epoch, WIRE),
        timeout=PROBE_TIMEOUT_S,
        dialect=WIRE.dialect,
    )
    if response_error(response) != "NONE":
        raise RuntimeError(f"{target.implementation}: warm-up UpdateMetadata refused: {response}")
    return {"seconds": round(time.perf_counter() - began, 3), "brokers": brokers}


async def run_target(target: Target, zk_connect: str, settings: Settings, warm_up_s: float) -> dict[str, Any]:
    """Warm the broker's metadata cache, probe it ``warm_up_s`` unmeasured (its first log, and for
    Kafka the JIT compiler), then measured idle, then under load."""
    zk = AsyncZooKeeper(zk_connect)
    await zk.start()
    load: LoadGenerator | None = None
    connection: KafkaConnection | None = None
    phases: list[dict[str, Any]] = []
    result: dict[str, Any] = {"control_listener": target.control_listener}
    try:
        await elect(zk)
        await target.start(zk)
        result["broker_epoch"] = target.epoch
        connection = await KafkaConnection.open(
            *target.endpoints[target.control_listener], client_id=f"controller-{CONTROLLER_ID}"
        )
        warm = await warm_up(target, connection, settings)
        result["warm_up_update_metadata_s"] = warm["seconds"]
        requests = KafkaWireProbe(warm["brokers"], target.endpoints["PLAINTEXT"], target.epoch)
        label = f"{target.implementation} {target.mode}"
        if warm_up_s > 0:
            print(f"{label}: {warm_up_s:.0f} s of probes not measured (first log, JIT)", flush=True)
            result["warm_up_probes"] = len(
                await probe(connection, requests, warm_up_s, settings.interval_ms / 1000)
            )
        print(f"{label}: idle probe for {settings.duration_s:.0f} s", flush=True)
        phases.append(await measure_phase("idle", target, connection, requests, settings, None))
        load = LoadGenerator(*target.endpoints["PLAINTEXT"], settings, one_batch=True)
        await load.start()
        result["saturation"] = await wait_saturated(
            target, settings.queued_max_requests, settings.saturation_timeout_s
        )
        print(f"{label}: saturated={result['saturation']['saturated']}; loaded probe", flush=True)
        phases.append(await measure_phase("loaded", target, connection, requests, settings, load))
        load.stop()
        result["produce"] = {
            "requests_answered": load.produced,
            "records_answered": load.produced * PRODUCE_BATCHES,
            "probe_partition_end": await end_offset(*target.endpoints["PLAINTEXT"], PROBE_TOPIC),
        }
    finally:
        if load is not None:
            load.stop()
        if connection is not None:
            await connection.close()
        result["exit_code"] = target.stop()
        await zk.close()
    samples = [s for p in phases for s in p["samples"]]
    target.attach_times(samples)
    result["accepted"] = target.acceptance(samples)
    result["phases"] = {p["phase"]: report_phase(p, settings.queued_max_requests) for p in phases}
    return result


async def run_all(
    connect_string: str, workdir: Path, settings: Settings, warm_up_s: float
) -> dict[str, dict[str, Any]]:
    """Kafka and ours, dedicated then shared, interleaved so that a change in the machine's load
    falls on both; each broker in its own chroot."""
    results: dict[str, dict[str, Any]] = {i: {} for i in IMPLEMENTATIONS}
    for mode in MODES:
        for implementation in IMPLEMENTATIONS:
            zk_connect = await chroot(connect_string, f"{implementation}-{mode}")
            target = make_target(implementation, mode, workdir, zk_connect, settings)
            results[implementation][mode] = await run_target(target, zk_connect, settings, warm_up_s)
    return results


# -- figures and output


def p99(result: dict[str, Any], phase: str) -> float | None:
    return result["phases"][phase]["round_trip_ms"]["p99"]


def figures(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per implementation the KIP-291 figures; then ours over Kafka for each."""
    out: dict[str, Any] = {}
    for implementation, modes in results.items():
        dedicated, shared = modes["dedicated"], modes["shared"]
        idle, loaded, loaded_shared = p99(dedicated, "idle"), p99(dedicated, "loaded"), p99(shared, "loaded")
        out[implementation] = {
            "idle_p99_ms": idle,
            "loaded_p99_dedicated_ms": loaded,
            "loaded_p99_shared_ms": loaded_shared,
            "loaded_over_idle_p99": ratio(loaded, idle),
            "shared_over_dedicated_p99": ratio(loaded_shared, loaded),
            "metadata_per_s_loaded_dedicated": dedicated["phases"]["loaded"]["metadata_per_s"],
            "metadata_per_s_loaded_shared": shared["phases"]["loaded"]["metadata_per_s"],
            "records_per_s_loaded_dedicated": dedicated["phases"]["loaded"]["records_per_s"],
            "saturated": [modes[m]["saturation"]["saturated"] for m in MODES],
        }
    ours, kafka = out["ours"], out["kafka"]
    out["ours_over_kafka"] = {key: ratio(ours[key], kafka[key]) for key in kafka if key != "saturated"}
    return out


FIGURE_ROWS = (
    ("idle p99 ms", "idle_p99_ms"),
    ("loaded p99 ms, dedicated", "loaded_p99_dedicated_ms"),
    ("loaded p99 ms, shared", "loaded_p99_shared_ms"),
    ("loaded / idle (dedicated)", "loaded_over_idle_p99"),
    ("shared / dedicated (loaded)", "shared_over_dedicated_p99"),
    ("Metadata/s loaded, dedicated", "metadata_per_s_loaded_dedicated"),
    ("Metadata/s loaded, shared", "metadata_per_s_loaded_shared"),
    ("records/s loaded, dedicated", "records_per_s_loaded_dedicated"),
)


def table(results: dict[str, dict[str, Any]], figs: dict[str, Any]) -> str:
    head = (
        f"{'impl':<7}{'mode':<11}{'phase':<8}{'probes':>7}{'errors':>7}{'rtt p50':>9}{'rtt p99':>9}"
        f"{'rtt max':>9}{'LAI in':>8}{'md/s':>8}{'rec/s':>9}{'queue':>7}{'full':>6}{'cpu':>6}{'other':>6}"
    )
    lines = [head, "-" * len(head)]
    for implementation, modes in results.items():
        for mode, result in modes.items():
            for name, p in result["phases"].items():
                rtt = p["round_trip_ms"]
                errors = sum(n for e, n in p["responses"].items() if e != "NONE")
                queue = p["data_queue_size"]
                lines.append(
                    f"{implementation:<7}{mode:<11}{name:<8}{p['probes']:>7}{errors:>7}"
                    f"{cell(rtt['p50'], 9)}{cell(rtt['p99'], 9)}{cell(rtt['max'], 9)}"
                    f"{cell(p['leader_and_isr_handle_ms']['p99'], 8)}{p['metadata_per_s']:>8.1f}"
                    f"{p['records_per_s']:>9}{cell(queue['mean'], 7)}{cell(queue['full_share'], 6)}"
                    f"{cell(p['cpu_cores']['broker'], 6)}{cell(p['cpu_cores']['other'], 6)}"
                )
    lines += ["", *figure_table(figs, FIGURE_ROWS, label_width=32, value_width=10)]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.kafka_control_latency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_probe_options(parser, brokers_under_test="both brokers'")
    parser.add_argument(
        "--warm-up", type=float, default=10.0, help="seconds of unmeasured probes before the idle phase"
    )
    parser.add_argument(
        "--saturation-timeout", type=float, default=60.0, help="seconds to wait for the queue to fill"
    )
    parser.add_argument("--workdir", type=Path, help="keep every log here (default: a temporary directory)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results" / "kafka_control_latency.json",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    classpath(BROKER)  # JarsMissing, naming `make kafka`, before anything starts
    settings = probe_settings(args, saturation_timeout_s=args.saturation_timeout)
    load = MachineLoad()
    with zookeeper_workdir("kafka-control-latency-", keep=args.workdir) as (server, workdir):
        results = asyncio.run(run_all(server.connect_string, workdir, settings, args.warm_up))
    figs = figures(results)
    print(table(results, figs))
    report = {
        **report_head("kafka_control_latency", argv, load),
        "settings": {
            **asdict(settings),
            "inter_broker_protocol_version": IBP,
            "probe_requests": [
                f"LeaderAndIsr v{WIRE.leader_and_isr} (1 partition, leader epoch rising)",
                f"UpdateMetadata v{WIRE.update_metadata} (1 partition, all brokers)",
            ],
            "produce_load": f"Produce v7 acks=1, one batch of {PRODUCE_BATCHES} records of 100 bytes",
            "control_plane_queue_capacity": 20,
            "warm_up_s": args.warm_up,
        },
        "figures": figs,
        "results": results,
    }
    print(f"load: {report['load']}")
    print(json.dumps({k: figs[k] for k in ("kafka", "ours", "ours_over_kafka")}))
    write_report(args.out, report)


if __name__ == "__main__":
    main()
