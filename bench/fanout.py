"""Seed 002's UpdateMetadata fan-out: per-broker epochs (KIP-380) beside one max-epoch encoding.

The controller tells every broker about every partition after a failover. With per-broker epochs
(UpdateMetadata v5) each broker's copy carries its own epoch, so the body is encoded N times and N
copies are alive at once; with the seed's ``max_broker_epoch`` (v7) it is encoded once and the same
``bytes`` go to every broker. This measures what that costs the controller: peak memory, CPU, and the
time until every broker has answered.

Each (mode, N) runs in a fresh process so its peak RSS is its own. That process builds a
ControllerContext in memory (no ZooKeeper) with N live brokers whose control listeners are
``bench.ack_brokers`` (started once, unregistered, in their own process) and ``--partitions``
partitions, RF 3 round-robin, then records VmRSS, resets the peak (``/proc/self/clear_refs``) and
times one ``RequestBatch.add_update_metadata(all brokers, all partitions)``, ``build()``, and sending
every request through ``controller.channel.ChannelManager`` until every response is in. With fewer
than 3 brokers the context knows 3 (RF 3 needs them) but the request goes to N only, so the body
is the same size at every N. Results go to bench/results/fanout.json and a table on stdout.

    .venv/bin/python -m bench.fanout [--partitions 200000] [--brokers 1,50,200] [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import uvloop

from bench.ack_brokers import AckBrokers
from bench.machine import machine, write_report
from bench.measure import cpu_stall_us, ratio, stall_share, status_kib
from controller.channel import ChannelManager
from controller.context import ControllerContext, LiveBroker
from controller.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from controller.request_batch import EpochProtocol, OutgoingRequest, RequestBatch
from daemon.runtime import die_with_parent
from zkstore.znodes import BrokerRegistration, Endpoint

REPLICATION_FACTOR = 3
PER_TOPIC = 100
HOST = "127.0.0.1"
MIB = 1024 * 1024
MODES = {"per-broker": EpochProtocol.PER_BROKER, "max-epoch": EpochProtocol.MAX_BROKER_EPOCH}
MAX_EPOCH_MEMORY_TARGET = 1.2
"""Max-epoch mode: peak memory growth at the largest N over the smallest N should stay below this."""


# -- one measurement, in its own process


def reset_peak_rss() -> bool:
    """Make VmHWM start again from the current RSS (Linux 4.0+); False where that is not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def build_context(ports: list[int], partitions: int) -> ControllerContext:
    """N live brokers at the ack brokers' ports (at least RF of them known) and RF-3 partitions."""
    ctx = ControllerContext(controller_id=0, epoch=2)
    known = max(len(ports), REPLICATION_FACTOR)
    for i in range(known):
        broker_id = i + 1
        port = ports[i] if i < len(ports) else ports[0]
        registration = BrokerRegistration(
            broker_id=broker_id,
            endpoints=(Endpoint("CONTROLLER", HOST, port), Endpoint("PLAINTEXT", HOST, port)),
            listener_security_protocol_map={"CONTROLLER": "PLAINTEXT", "PLAINTEXT": "PLAINTEXT"},
            timestamp=int(time.time() * 1000),
            rack=f"rack-{broker_id % 3}",
        )
        ctx.brokers[broker_id] = LiveBroker(registration, 0x1_0000_0000 + broker_id)
    ids = sorted(ctx.brokers)
    for t in range(-(-partitions // PER_TOPIC)):
        topic = f"bench-{t:05d}"
        count = min(PER_TOPIC, partitions - t * PER_TOPIC)
        assignment = {}
        for p in range(count):
            index = t * PER_TOPIC + p
            replicas = tuple(ids[(index + k) % known] for k in range(REPLICATION_FACTOR))
            assignment[p] = replicas
            state = LeaderAndIsr(leader=replicas[0], leader_epoch=1, isr=replicas, partition_epoch=1)
            ctx.leadership[TopicPartition(topic, p)] = LeaderIsrAndControllerEpoch(state, 1)
        ctx.assignments[topic] = assignment
        ctx.topic_ids[topic] = None
    return ctx


async def send_all(ctx: ControllerContext, requests: list[OutgoingRequest], targets: list[int]) -> float:
    """Send through the controller's channel manager; the seconds until the last response."""
    channel = ChannelManager(ctx.controller_id, socket_timeout_s=300)
    for broker_id in targets:
        endpoint = ctx.brokers[broker_id].registration.endpoint("CONTROLLER")
        assert endpoint is not None
        channel.add_broker(broker_id, endpoint.host, endpoint.port)
    all_answered = asyncio.get_running_loop().create_future()
    answered = 0

    def on_response(request: OutgoingRequest, response: dict[str, Any]) -> None:
        nonlocal answered
        if response.get("error_code") and not all_answered.done():
            all_answered.set_exception(RuntimeError(f"broker {request.broker_id} answered {response}"))
        answered += 1
        if answered == len(requests) and not all_answered.done():
            all_answered.set_result(None)

    started = time.perf_counter()
    for request in requests:
        channel.send(request, on_response)
    await all_answered
    elapsed = time.perf_counter() - started
    await channel.shutdown()
    return elapsed


async def measure(mode: str, ports: list[int], partitions: int) -> dict[str, Any]:
    ctx = build_context(ports, partitions)
    targets = list(range(1, len(ports) + 1))
    gc.collect()
    rss_before = status_kib("VmRSS")
    hwm_reset = reset_peak_rss()
    cpu_started = time.process_time()
    stall_before = cpu_stall_us()
    started = time.perf_counter()

    batch = RequestBatch(ctx, MODES[mode].wire, "PLAINTEXT")
    batch.add_update_metadata(targets, ctx.all_partitions())
    requests = batch.build()
    built = time.perf_counter()
    send_s = await send_all(ctx, requests, targets)
    done = time.perf_counter()

    cpu_s = time.process_time() - cpu_started
    hwm = status_kib("VmHWM")
    return {
        "mode": mode,
        "brokers": len(ports),
        "partitions": partitions,
        "requests": len(requests),
        "encodes": batch.encodes,
        "bytes_encoded": batch.bytes_encoded,
        "bytes_sent": sum(len(r.body) for r in requests),
        "rss_before_mib": round(rss_before / 1024, 1),
        "peak_rss_mib": round(hwm / 1024, 1),
        "peak_growth_mib": round((hwm - rss_before) / 1024, 1),
        "peak_reset": hwm_reset,
        "cpu_s": round(cpu_s, 3),
        "build_s": round(built - started, 3),
        "send_s": round(send_s, 3),
        "all_responded_s": round(done - started, 3),
        "cpu_stall_share": stall_share(stall_before, cpu_stall_us(), done - started),
    }


def run_child(args: argparse.Namespace) -> None:
    ports = [int(p) for p in args.ports.split(",")]
    result = uvloop.run(measure(args.mode, ports, args.partitions))
    print(json.dumps(result), flush=True)


# -- the benchmark


def run_one(mode: str, ports: list[int], partitions: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.fanout", "--child", "--mode", mode]
    command += ["--partitions", str(partitions), "--ports", ",".join(map(str, ports))]
    started = time.perf_counter()
    out = subprocess.run(
        command, check=True, stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["process_wall_s"] = round(time.perf_counter() - started, 2)
    return result


def comparisons(results: list[dict[str, Any]], counts: list[int]) -> dict[str, Any]:
    by = {(r["mode"], r["brokers"]): r for r in results}
    low, high = min(counts), max(counts)
    growth = {}
    for mode in MODES:
        if (mode, low) in by and (mode, high) in by:
            growth[mode] = ratio(by[mode, high]["peak_growth_mib"], by[mode, low]["peak_growth_mib"])
    per_n = {}
    for n in counts:
        if ("per-broker", n) in by and ("max-epoch", n) in by:
            pb, me = by["per-broker", n], by["max-epoch", n]
            per_n[str(n)] = {
                "memory": ratio(pb["peak_growth_mib"], me["peak_growth_mib"]),
                "cpu": ratio(pb["cpu_s"], me["cpu_s"]),
                "all_responded": ratio(pb["all_responded_s"], me["all_responded_s"]),
            }
    met = growth.get("max-epoch")
    return {
        f"memory_growth_n{high}_over_n{low}": growth,
        "per_broker_over_max_epoch": per_n,
        "target": {
            "max_epoch_memory_growth_ratio_at_most": MAX_EPOCH_MEMORY_TARGET,
            "met": None if met is None else met <= MAX_EPOCH_MEMORY_TARGET,
        },
    }


def print_table(results: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    columns = ["N", "requests", "encodes", "MB encoded", "MB sent", "peak +MiB", "CPU s", "build s"]
    columns.append("all acked s")
    print(f"{'mode':<12}" + "".join(f"{c:>13}" for c in columns))
    for r in results:
        cells = (
            r["brokers"],
            r["requests"],
            r["encodes"],
            f"{r['bytes_encoded'] / 1e6:.1f}",
            f"{r['bytes_sent'] / 1e6:.1f}",
            f"{r['peak_growth_mib']:.1f}",
            f"{r['cpu_s']:.2f}",
            f"{r['build_s']:.2f}",
            f"{r['all_responded_s']:.2f}",
        )
        print(f"{r['mode']:<12}" + "".join(f"{c:>13}" for c in cells))
    print()
    for key, value in summary.items():
        print(f"{key}: {json.dumps(value)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--brokers", default="1,50,200", help="comma-separated broker counts")
    parser.add_argument("--modes", default="per-broker,max-epoch")
    parser.add_argument("--quick", action="store_true", help="20,000 partitions over 1 and 10 brokers")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "fanout.json"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=sorted(MODES), help=argparse.SUPPRESS)
    parser.add_argument("--ports", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args)
        return
    if args.quick:
        args.partitions, args.brokers = 20_000, "1,10"
    counts = sorted({int(n) for n in args.brokers.split(",")})
    modes = [m.strip() for m in args.modes.split(",")]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes {sorted(unknown)}")

    results = []
    with AckBrokers(max(counts)) as ack:
        ports = [ack.brokers[b].port for b in sorted(ack.brokers)]
        for mode in modes:
            for n in counts:
                print(f"{mode} N={n}: running", flush=True)
                results.append(run_one(mode, ports[:n], args.partitions))
                r = results[-1]
                print(
                    f"  peak +{r['peak_growth_mib']} MiB, {r['cpu_s']} s CPU, all acked after "
                    f"{r['all_responded_s']} s",
                    flush=True,
                )
    summary = comparisons(results, counts)
    print()
    print_table(results, summary)
    report = {
        "benchmark": "fanout",
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "-m", "bench.fanout", *sys.argv[1:]]),
        "partitions": args.partitions,
        "replication_factor": REPLICATION_FACTOR,
        "broker_counts": counts,
        "results": results,
        **summary,
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()
