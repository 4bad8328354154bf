"""Synthetic but consistent cluster directories for the audit: any number of history rows, quickly.

One directory holds the logs of two controllers and three brokers and of ``--runs`` chaos runs, laid
out as ``python -m chaos run`` and the daemons lay them out (``DIR/<node>/events.jsonl``,
``DIR/chaos/<run>/events.jsonl`` and ``history.jsonl``). Each run produces to a topic of
``--partitions`` partitions at a steady rate while its broker faults come and go: every
``FAULT_EVERY_S`` seconds a broker bounces (KIP-380: it registers with a higher epoch, the controller
moves its leaderships with a new leader epoch and partition epoch, and every broker applies the
change through its control-plane listener). Every acknowledged record is read back once where it was
acknowledged, so every check of ``python -m pipeline audit`` passes: a generated directory measures
the audit, never its failures.

Lines are written with string formatting (not ``json.dumps``): a million history rows take seconds.

    .venv/bin/python -m bench.audit_logs DIR --rows 1000000 [--runs 1] [--partitions 6]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
RATE = 1000
"""Acknowledged records per second of a run."""
FAULT_EVERY_S = 20
BROKERS = (1, 2, 3)
CONTROLLERS = ("controller-1001", "controller-1002")
CONTROL_LISTENER = "CONTROLLER"
RUN_GAP_S = 60


def ts(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Logs:
    """Open files, one per node, and a clock that every line advances by a microsecond at least."""

    root: Path
    files: dict[str, IO[str]] = field(default_factory=dict)

    def path(self, node: str) -> Path:
        return self.root / node / "events.jsonl"

    def write(self, node: str, at: dt.datetime, kind: str, path: Path | None = None, **fields: Any) -> None:
        target = path or self.path(node)
        key = str(target)
        if key not in self.files:
            target.parent.mkdir(parents=True, exist_ok=True)
            self.files[key] = target.open("w", encoding="utf-8")
        event = {"ts": ts(at), "node": node, "kind": kind, **fields}
        self.files[key].write(json.dumps(event, separators=(",", ":")) + "\n")

    def close(self) -> None:
        for f in self.files.values():
            f.close()


@dataclass
class Cluster:
    """The cluster's state as the generated logs tell it: epochs, leaders, ISRs, znode versions."""

    logs: Logs
    partitions: int
    topic: str = "chaos"
    controller_epoch: int = 1
    broker_epochs: dict[int, int] = field(default_factory=lambda: {b: 4294967296 + 10 * b for b in BROKERS})
    leaders: dict[int, int] = field(default_factory=dict)
    leader_epochs: dict[int, int] = field(default_factory=dict)
    versions: dict[int, int] = field(default_factory=dict)
    correlation: int = 0

    @property
    def controller(self) -> str:
        return CONTROLLERS[0]

    def start(self, at: dt.datetime) -> dt.datetime:
        """Daemons started, controller elected, brokers registered, the topic created."""
        w = self.logs.write
        for node in CONTROLLERS:
            cid = int(node.split("-")[1])
            w(node, at, "controller_started", controller_id=cid, rpc_endpoint=f"PLAINTEXT://127.0.0.1:{cid}")
        at += dt.timedelta(milliseconds=5)
        for b in BROKERS:
            at = self._registered(at, b)
            w(
                f"broker-{b}",
                at,
                "broker_started",
                broker_id=b,
                broker_epoch=self.broker_epochs[b],
                listeners=[
                    f"INTERNAL://127.0.0.1:{19090 + b}",
                    f"{CONTROL_LISTENER}://127.0.0.1:{19190 + b}",
                ],
                control_plane_listener=CONTROL_LISTENER,
            )
        at += dt.timedelta(milliseconds=5)
        w(
            self.controller,
            at,
            "controller_elected",
            controller_id=1001,
            controller_epoch=1,
            epoch_zk_version=1,
            rpc_endpoint="PLAINTEXT://127.0.0.1:1001",
        )
        epochs = {str(b): e for b, e in self.broker_epochs.items()}
        w(self.controller, at, "brokers_loaded", controller_epoch=1, epochs=epochs)
        w(self.controller, at, "failover_complete", controller_epoch=1, brokers=3, topics=0, partitions=0)
        at += dt.timedelta(milliseconds=5)
        w(self.controller, at, "topics_created", topics=[self.topic], partitions=self.partitions)
        for p in range(self.partitions):
            self.leaders[p], self.leader_epochs[p], self.versions[p] = BROKERS[p % 3], 0, 0
            at += dt.timedelta(microseconds=50)
            self._write_state(at, p, "new partition")
        return self._apply_everywhere(at, list(range(self.partitions)))

    def _registered(self, at: dt.datetime, broker: int) -> dt.datetime:
        previous = self.broker_epochs[broker]
        self.broker_epochs[broker] = previous + 1000
        at += dt.timedelta(microseconds=100)
        self.logs.write(
            f"broker-{broker}",
            at,
            "registered",
            broker_epoch=self.broker_epochs[broker],
            previous_epoch=previous,
        )
        return at

    def isr(self) -> list[int]:
        return list(BROKERS)

    def _state(self, p: int) -> dict[str, Any]:
        """Partition ``p``'s state as a controller writes it and a broker applies it."""
        return {
            "topic": self.topic,
            "partition": p,
            "leader": self.leaders[p],
            "leader_epoch": self.leader_epochs[p],
            "isr": self.isr(),
            "partition_epoch": self.versions[p],
        }

    def _write_state(self, at: dt.datetime, p: int, reason: str) -> None:
        self.logs.write(
            self.controller,
            at,
            "leader_and_isr_change",
            **self._state(p),
            controller_epoch=self.controller_epoch,
            reason=reason,
            unclean=False,
        )

    def _apply_everywhere(
        self, at: dt.datetime, partitions: list[int], everything_to: int | None = None
    ) -> dt.datetime:
        """Every broker gets a LeaderAndIsr with ``partitions`` on its control-plane listener, and
        broker ``everything_to`` (a new process) with every partition."""
        max_epoch = max(self.broker_epochs.values())
        for b in BROKERS:
            node = f"broker-{b}"
            for p in range(self.partitions) if b == everything_to else partitions:
                at += dt.timedelta(microseconds=30)
                kind = "become_leader" if self.leaders[p] == b else "become_follower"
                self.logs.write(node, at, kind, **self._state(p), was_leader=False)
            self.correlation += 1
            at += dt.timedelta(microseconds=30)
            self.logs.write(
                node,
                at,
                "control_request_handled",
                api="LeaderAndIsr",
                api_version=5,
                correlation_id=self.correlation,
                listener=CONTROL_LISTENER,
                error="NONE",
                partition_errors=0,
                queue_ms=0.2 + 0.01 * (self.correlation % 7),
                handle_ms=1.0 + 0.1 * (self.correlation % 5),
                controller_id=1001,
                controller_epoch=self.controller_epoch,
                max_broker_epoch=max_epoch,
                broker_epoch_now=self.broker_epochs[b],
            )
        return at

    def bounce(self, at: dt.datetime, broker: int) -> dt.datetime:
        """KIP-380's fast bounce: a higher epoch; its leaderships move with new epochs."""
        previous = self.broker_epochs[broker]
        at = self._registered(at, broker)
        node = f"broker-{broker}"
        self.logs.write(
            node,
            at,
            "broker_started",
            broker_id=broker,
            broker_epoch=self.broker_epochs[broker],
            listeners=[f"INTERNAL://127.0.0.1:{19090 + broker}"],
            control_plane_listener=CONTROL_LISTENER,
        )
        at += dt.timedelta(milliseconds=2)
        self.logs.write(
            self.controller,
            at,
            "broker_change",
            controller_epoch=self.controller_epoch,
            new=[],
            dead=[],
            bounced=[broker],
            epochs={str(b): e for b, e in self.broker_epochs.items()},
            previous_epochs={str(broker): previous},
        )
        moved = [p for p in range(self.partitions) if self.leaders[p] == broker]
        for p in moved:
            self.leaders[p] = next(b for b in BROKERS if b != broker)
            self.leader_epochs[p] += 1
            self.versions[p] += 1
            at += dt.timedelta(microseconds=80)
            self._write_state(at, p, "offline election")
        return self._apply_everywhere(at, moved, everything_to=broker)


def history_lines(run: str, topic: str, partitions: int, rows: int, start: dt.datetime) -> Iterator[str]:
    """``rows`` history lines: half acknowledged produces, then the final read of each."""
    acked = rows // 2
    step = 1_000_000 // RATE
    base = int(start.timestamp() * 1_000_000)
    offsets = [0] * partitions
    fmt = (
        '{{"ts":"{ts}","node":"workload","kind":"produce_acked","topic":"{topic}","partition":{p},'
        '"offset":{o},"value":"{run}-{i:09d}","latency_ms":{lat},"acks":"all"}}\n'
    )
    for i in range(acked):
        p = i % partitions
        at = dt.datetime.fromtimestamp((base + i * step) / 1_000_000, dt.UTC)
        yield fmt.format(
            ts=ts(at), topic=topic, p=p, o=offsets[p], run=run, i=i, lat=2.0 + (i * 7919 % 97) / 10
        )
        offsets[p] += 1
    read_at = base + acked * step + 5_000_000
    offsets = [0] * partitions
    consumed = (
        '{{"ts":"{ts}","node":"workload","kind":"consumed","topic":"{topic}","partition":{p},'
        '"offset":{o},"value":"{run}-{i:09d}"}}\n'
    )
    for i in range(rows - acked):
        p = i % partitions
        at = dt.datetime.fromtimestamp((read_at + i) / 1_000_000, dt.UTC)
        yield consumed.format(ts=ts(at), topic=topic, p=p, o=offsets[p], run=run, i=i)
        offsets[p] += 1


def generate(root: Path, rows: int, runs: int = 1, partitions: int = 6) -> dict[str, Any]:
    """Write a directory of ``runs`` chaos runs with ``rows`` history rows in all (an even number per
    run); returns what was written."""
    if root.exists():
        shutil.rmtree(root)
    logs = Logs(root)
    cluster = Cluster(logs, partitions)
    at = cluster.start(START)
    per_run = max(2, rows // runs // 2 * 2)
    written = 0
    for r in range(runs):
        at += dt.timedelta(seconds=RUN_GAP_S if r else 1)
        at = write_run(cluster, root, r, at, per_run)
        written += per_run
    logs.close()
    return {"directory": str(root), "runs": runs, "history_rows": written, "partitions": partitions}


def write_run(cluster: Cluster, root: Path, index: int, at: dt.datetime, rows: int) -> dt.datetime:
    """Chaos run number ``index``, started at ``at``: its events, ``rows`` history rows and its broker
    bounces; returns the time a second after it finished."""
    logs, partitions = cluster.logs, cluster.partitions
    run = f"run-{at:%Y%m%dT%H%M%SZ}"
    chaos = root / "chaos" / run / "events.jsonl"
    acked = rows // 2
    duration_s = acked / RATE
    logs.write(
        "chaos",
        at,
        "run_started",
        path=chaos,
        run_id=run,
        topic=cluster.topic,
        partitions=partitions,
        replication_factor=3,
        faults=["bounce"],
        seed=index,
        duration_s=duration_s,
        rate=RATE,
        interval_s=20.0,
    )
    start = at + dt.timedelta(milliseconds=100)
    history = root / "chaos" / run / "history.jsonl"
    history.parent.mkdir(parents=True, exist_ok=True)
    with history.open("w", encoding="utf-8") as f:
        f.writelines(history_lines(run, cluster.topic, partitions, rows, start))
    write_bounces(cluster, chaos, index, start, int(duration_s // FAULT_EVERY_S))
    end = start + dt.timedelta(seconds=duration_s + 6)
    logs.write(
        "chaos",
        end,
        "replicas_verified",
        path=chaos,
        partitions=partitions,
        consistent=partitions,
        divergences=[],
    )
    logs.write(
        "chaos",
        end + dt.timedelta(milliseconds=1),
        "run_finished",
        path=chaos,
        run_id=run,
        acked=acked,
        failed=0,
        consumed=rows - acked,
        duration_s=duration_s + 6,
    )
    return end + dt.timedelta(seconds=1)


def write_bounces(cluster: Cluster, chaos: Path, index: int, start: dt.datetime, faults: int) -> None:
    """Run ``index``'s ``faults`` broker bounces, one every ``FAULT_EVERY_S`` from ``start``, each
    injected, applied by the cluster and healed."""
    for n in range(faults):
        at_fault = start + dt.timedelta(seconds=FAULT_EVERY_S * (n + 1) - 10)
        broker = BROKERS[(index + n) % 3]
        cluster.logs.write(
            "chaos",
            at_fault,
            "fault_injected",
            path=chaos,
            fault="bounce",
            target=f"broker-{broker}",
            role="broker",
            detail="SIGKILL and started again at once",
        )
        done = cluster.bounce(at_fault + dt.timedelta(milliseconds=300), broker)
        cluster.logs.write(
            "chaos",
            done,
            "fault_healed",
            path=chaos,
            fault="bounce",
            target=f"broker-{broker}",
            role="broker",
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_logs", description=__doc__.split("\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--rows", type=int, default=1_000_000, help="history rows in all (1000000)")
    parser.add_argument("--runs", type=int, default=1, help="chaos runs (1)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of the runs' topic (6)")
    args = parser.parse_args(argv)
    print(json.dumps(generate(args.directory, args.rows, args.runs, args.partitions)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
