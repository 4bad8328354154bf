"""What confirming a new controller epoch in ZooKeeper costs a real failover.

Brokers believe a control request from a controller epoch above any they have confirmed only once
ZooKeeper's ``/controller`` and ``/controller_epoch`` confirm it (``controller.epoch.confirmation.enable``,
beyond Kafka): one sync and one multi-read per broker and failover. This runs three broker processes
and two controller candidates, once with the confirmation and once without (each in its own
ZooKeeper chroot), and hands the controllership over ``--rounds`` times (SIGTERM: the active one
resigns, the other takes over at once). Each round measures, from the new controller's election, the
time until the last broker has handled its first LeaderAndIsr of the new epoch; the ratio of the two
modes' medians is the cost. The floor beside it is the confirmation's own read, timed alone.

Results go to bench/results/epoch_confirmation.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.machine import machine, write_report
from bench.zookeeper import zookeeper_workdir
from cluster.processes import BrokerProcess, ControllerProcess, Event
from zkstore import znodes
from zkstore.aio import AsyncZooKeeper
from zkstore.batch_read import get_data_many
from zkstore.topic_writes import create_topic

BROKERS = (1, 2, 3)
CONTROLLERS = (1001, 1002)


def _ts(event: Event) -> float:
    return datetime.fromisoformat(str(event["ts"]).replace("Z", "+00:00")).timestamp()


async def _active(zk: AsyncZooKeeper) -> tuple[int, int]:
    data, _ = await zk.get(znodes.CONTROLLER)
    registration = znodes.decode_controller_registration(data, znodes.CONTROLLER)
    epoch_data, _ = await zk.get(znodes.CONTROLLER_EPOCH)
    epoch = znodes.decode_controller_epoch(epoch_data, znodes.CONTROLLER_EPOCH)
    assert registration is not None and epoch is not None
    return registration.broker_id, epoch


async def _first_lai(broker: BrokerProcess, epoch: int) -> float:
    def handled(event: Event) -> bool:
        return (
            event["kind"] == "control_request_handled"
            and event.get("api") == "LeaderAndIsr"
            and event.get("controller_epoch") == epoch
        )

    return _ts(await broker.wait_event(handled, timeout=120, what=f"LeaderAndIsr of epoch {epoch}"))


async def run_mode(
    confirm: bool, root_connect: str, workdir: Path, partitions: int, rounds: int
) -> dict[str, Any]:
    name = "confirmed" if confirm else "unconfirmed"
    root = AsyncZooKeeper(root_connect)
    await root.start()
    await root.ensure_path(f"/{name}")
    await root.close()
    connect = f"{root_connect}/{name}"
    directory = workdir / name
    setting = {"controller.epoch.confirmation.enable": str(confirm).lower()}
    brokers = [BrokerProcess(b, connect, directory, **setting) for b in BROKERS]
    controllers = {c: ControllerProcess(c, connect, directory) for c in CONTROLLERS}
    zk = AsyncZooKeeper(connect)
    takeovers: list[float] = []
    try:
        for process in [*brokers, *controllers.values()]:
            process.start()
        for broker in brokers:
            await broker.wait_kind("broker_started", timeout=60)
        await zk.start()
        replicas = {p: tuple(BROKERS[(p + i) % 3] for i in range(3)) for p in range(partitions)}
        await create_topic(zk, "epochs", replicas)
        active, epoch = await _active(zk)
        for broker in brokers:
            await _first_lai(broker, epoch)
        for _ in range(rounds):
            controllers[active].stop(timeout=60)
            successor = next(c for c in CONTROLLERS if c != active)

            def elected(event: Event, after: int = epoch) -> bool:
                return event["kind"] == "controller_elected" and event["controller_epoch"] > after

            won = await controllers[successor].wait_event(elected, timeout=120, what="the takeover")
            epoch = int(won["controller_epoch"])
            last = max([await _first_lai(broker, epoch) for broker in brokers])
            takeovers.append((last - _ts(won)) * 1000)
            controllers[active] = ControllerProcess(active, connect, directory).start()
            await controllers[active].wait_kind("controller_started", timeout=60)
            active = successor
        floor = await _confirmation_read(zk, rounds * 5)
    finally:
        await zk.close()
        for process in [*brokers, *controllers.values()]:
            with contextlib.suppress(Exception):
                process.stop(timeout=60)
    return {
        "mode": name,
        "takeover_ms": [round(t, 1) for t in takeovers],
        "takeover_median_ms": round(statistics.median(takeovers), 1),
        "confirmation_read_median_ms": round(floor, 2),
    }


async def _confirmation_read(zk: AsyncZooKeeper, count: int) -> float:
    """The read a broker makes to confirm an epoch: a sync, then one multi-read of both znodes."""
    times = []
    for _ in range(count):
        began = time.perf_counter()
        await zk.sync(znodes.CONTROLLER_EPOCH)
        await get_data_many(zk, [znodes.CONTROLLER, znodes.CONTROLLER_EPOCH])
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


async def run_all(connect: str, workdir: Path, partitions: int, rounds: int) -> list[dict[str, Any]]:
    return [await run_mode(confirm, connect, workdir, partitions, rounds) for confirm in (True, False)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=3000, help="partitions of the RF-3 topic")
    parser.add_argument("--rounds", type=int, default=5, help="takeovers per mode")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 100 partitions, 2 rounds")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "epoch_confirmation.json"
    )
    args = parser.parse_args(argv)
    partitions, rounds = (100, 2) if args.quick else (args.partitions, args.rounds)
    with zookeeper_workdir("epoch-confirmation-bench-") as (server, workdir):
        modes = asyncio.run(run_all(server.connect_string, workdir, partitions, rounds))
    confirmed, unconfirmed = modes
    ratio = confirmed["takeover_median_ms"] / unconfirmed["takeover_median_ms"]
    print(f"{'mode':<12} {'takeover median ms':>20} {'rounds':>30}")
    for mode in modes:
        print(f"{mode['mode']:<12} {mode['takeover_median_ms']:>20} {mode['takeover_ms']!s:>30}")
    read_ms = confirmed["confirmation_read_median_ms"]
    print(f"confirmed / unconfirmed: {ratio:.2f}; the confirmation read alone: {read_ms} ms")
    write_report(
        args.out,
        {
            "benchmark": "epoch_confirmation",
            "machine": machine(),
            "command": " ".join([Path(sys.executable).name, "-m", "bench.epoch_confirmation", *sys.argv[1:]]),
            "partitions": partitions,
            "rounds": rounds,
            "modes": modes,
            "confirmed_over_unconfirmed_takeover": round(ratio, 3),
            "confirmation_read_over_unconfirmed_takeover": round(
                confirmed["confirmation_read_median_ms"] / unconfirmed["takeover_median_ms"], 4
            ),
        },
    )


if __name__ == "__main__":
    main()
