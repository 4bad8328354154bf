"""``python -m chaos run|list``: fault injection with a recorded workload against a local cluster.

``run`` exits 0 when every acknowledged record was read back exactly once where it was acknowledged,
1 when not or when the run could not be carried out (one ``error:`` line on stderr), 2 on bad usage
or when the workload asked for cannot run here (``--workload kafka-verifiable`` without java or
Kafka's jars).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from confluent_kafka import KafkaException
from kazoo.exceptions import KazooException
from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from chaos import ChaosError
from chaos.compose import ComposeCluster
from chaos.java_tool import ToolsMissing, java_prefix
from chaos.run import WORKLOADS, RunConfig, RunResult, run
from chaos.schedule import DEFAULT_FAULTS, FAULTS, ROLES
from chaos.target import Target
from chaos.txn_verdict import TxnVerdict
from chaos.verdict import Verdict, judge, read_lines
from cluster import launcher, node_control, state_file
from cluster.admin_cli import print_table
from cluster.lifecycle_cli import add_dir_option, fail
from cluster.processes import DaemonError
from deploy.compose import COMPOSE_FILE, Compose
from deploy.engine import EngineError
from placement.errors import AdminError
from zkserver.errors import LocalServerError

COMPOSE_DIR = Path(".run/compose")
"""``--dir`` of a run with ``--compose`` unless given."""
SHOWN = 5
"""Values shown per problem in the summary; history.jsonl has them all."""


def _names(allowed: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    """An argparse type for comma-separated names out of ``allowed``."""

    def parse(text: str) -> tuple[str, ...]:
        names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
        unknown = [n for n in names if n not in allowed]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"choose from {','.join(allowed)} (got {text!r})")
        return names

    return parse


def _positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m chaos",
        description="Inject faults into a local cluster while a producer records what was acknowledged, "
        "then read everything back and check that nothing acknowledged was lost or duplicated.",
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    go = commands.add_parser("run", help="one chaos run against the cluster in --dir")
    _run_arguments(go)
    _target_arguments(go)
    go.set_defaults(handler=run_command)
    many = commands.add_parser(
        "campaign", help="many runs, each on a fresh cluster under --dir with the next seed; one summary"
    )
    _campaign_arguments(many)
    many.set_defaults(handler=campaign_command)
    listing = commands.add_parser("list", help="the chaos runs recorded under --dir")
    add_dir_option(listing)
    listing.set_defaults(handler=list_command)
    return top


def _run_arguments(go: argparse.ArgumentParser) -> None:
    """``run``: where it records, its faults and its workload."""
    add_dir_option(go)
    go.add_argument(
        "--duration", type=_positive(float), default=60.0, help="seconds of faults and produce (60)"
    )
    go.add_argument(
        "--faults",
        type=_names(FAULTS),
        default=DEFAULT_FAULTS,
        help=f"fault kinds to choose from: {','.join(FAULTS)} (default {','.join(DEFAULT_FAULTS)}; "
        "the cuts need a --netns cluster; see docs/chaos.md)",
    )
    go.add_argument(
        "--targets",
        type=_names(ROLES),
        default=("broker", "controller"),
        help=f"roles whose nodes may be hit, from {','.join(ROLES)} (broker,controller)",
    )
    go.add_argument("--interval", type=_positive(float), default=8.0, help="mean seconds between faults (8)")
    go.add_argument("--rate", type=_positive(int), default=200, help="records produced per second (200)")
    go.add_argument("--topic", default="chaos", help="created when missing (chaos)")
    go.add_argument(
        "--acks1-topic",
        default="chaos-acks1",
        help="a second topic written with acks=1 at half the rate; its losses are reported, not failed "
        "('' for none; chaos-acks1)",
    )
    go.add_argument("--partitions", type=_positive(int), default=6, help="for a new topic (6)")
    go.add_argument("--replication-factor", type=_positive(int), default=3, help="for a new topic (3)")
    go.add_argument("--seed", type=int, help="fault schedule seed (random; the run records it)")
    go.add_argument(
        "--no-idempotence", action="store_true", help="the acks=all producer without idempotence (no retries)"
    )
    go.add_argument("--no-group", action="store_true", help="no consumer group on the acks=all topic")
    go.add_argument(
        "--no-transactions",
        action="store_true",
        help="no transactional workload (a transactional producer to <topic>-txn, aborting a share on "
        "purpose, and a consume-transform-produce loop from the topic to <topic>-eos)",
    )
    go.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="default",
        help="who produces and consumes: librdkafka (default), or Kafka's own VerifiableProducer and "
        "VerifiableConsumer from the jars of `make kafka` (kafka-verifiable)",
    )
    go.add_argument(
        "--overlap",
        type=_positive(int),
        default=1,
        help="fault loops at once: 2 or more is a mixed run whose faults overlap, never on one node, one "
        "cut or one ZooKeeper fault (1)",
    )


def _target_arguments(go: argparse.ArgumentParser) -> None:
    """``run``: the cluster it breaks, a compose project's or one it starts itself."""
    go.add_argument(
        "--compose",
        type=Path,
        nargs="?",
        const=COMPOSE_FILE,
        metavar="FILE",
        help="break the containers of a running `docker compose up` cluster instead (docker-compose.yml "
        f"when no FILE): kill, bounce, restart, pause, isolate and the ZooKeeper faults; --dir then "
        f"holds the runs and copies of the daemons' event logs ({COMPOSE_DIR})",
    )
    go.add_argument(
        "--project", help="with --compose: the compose project name (default: the file's `name:`)"
    )
    go.add_argument(
        "--start",
        action="store_true",
        help="start a cluster in --dir first (3 brokers, 2 controllers), stop it after",
    )
    go.add_argument(
        "--netns", action="store_true", help="with --start: every node in its own namespace (root)"
    )
    go.add_argument(
        "--zookeeper-nodes", type=int, choices=(1, 3), default=1, help="with --start: ZooKeeper servers (1)"
    )
    go.add_argument(
        "--kafka-brokers", type=int, default=0, help="with --start: Apache Kafka 3.9 brokers beside ours (0)"
    )


def _campaign_arguments(many: argparse.ArgumentParser) -> None:
    """``campaign``: how many runs, their seeds, and what each run does."""
    add_dir_option(many)
    many.add_argument("--runs", type=_positive(int), default=20, help="how many runs (20)")
    many.add_argument("--first-seed", type=int, default=1, help="the first run's seed; then +1 each (1)")
    many.add_argument("--duration", type=_positive(float), default=120.0, help="seconds per run (120)")
    many.add_argument("--faults", type=_names(FAULTS), default=DEFAULT_FAULTS)
    many.add_argument(
        "--interval", type=_positive(float), default=6.0, help="mean seconds between faults (6)"
    )
    many.add_argument("--rate", type=_positive(int), default=200, help="records produced per second (200)")
    many.add_argument("--netns", action="store_true", help="every node in its own namespace (root)")
    many.add_argument("--zookeeper-nodes", type=int, choices=(1, 3), default=1)
    many.add_argument("--kafka-brokers", type=int, default=0, help="Apache Kafka 3.9 brokers beside ours (0)")
    many.add_argument("--overlap", type=_positive(int), default=1, help="fault loops at once (1)")


def _logging() -> None:
    """Progress on stderr, unless the host (a test) configured logging already."""
    if logging.getLogger().handlers:
        return
    logging.basicConfig(
        level=logging.INFO,
        format="%(message)s",
        handlers=[RichHandler(console=Console(stderr=True), show_path=False)],
    )
    logging.getLogger("kazoo").setLevel(logging.ERROR)


def _run_config(args: argparse.Namespace) -> RunConfig:
    return RunConfig(
        directory=args.dir,
        duration_s=args.duration,
        faults=args.faults,
        roles=args.targets,
        interval_s=args.interval,
        rate=args.rate,
        topic=args.topic,
        acks1_topic=args.acks1_topic or None,
        partitions=args.partitions,
        replication_factor=args.replication_factor,
        seed=args.seed,
        overlap=args.overlap,
        idempotent=not args.no_idempotence,
        group=not args.no_group,
        transactions=not args.no_transactions,
        workload=args.workload,
    )


def _refused(args: argparse.Namespace) -> int | None:
    """The exit status of a run that cannot start here, before a cluster is started for nothing."""
    if args.compose is not None and (args.start or args.netns):
        return fail("--compose runs against a compose project already up: no --start or --netns")
    if args.workload == "kafka-verifiable":
        try:
            java_prefix()
        except ToolsMissing as exc:
            return _unusable(exc)
    return None


def run_command(args: argparse.Namespace) -> int:
    _logging()
    config = _run_config(args)
    refused = _refused(args)
    if refused is not None:
        return refused
    started = False
    try:
        target: Target | None = None
        if args.compose is not None:
            directory = COMPOSE_DIR if args.dir == state_file.DEFAULT_DIR else args.dir
            compose = Compose(environment={}, project=args.project, files=(args.compose,))
            target = ComposeCluster(directory, compose)
        if args.start:
            logging.getLogger("chaos").info("starting a cluster in %s", args.dir)
            layout = launcher.Layout(
                zookeeper_nodes=args.zookeeper_nodes, netns=args.netns, kafka_brokers=args.kafka_brokers
            )
            asyncio.run(launcher.up(args.dir, layout))
            started = True
        result = asyncio.run(run(config, target))
    except ToolsMissing as exc:
        return _unusable(exc)
    except (ChaosError, state_file.ClusterError, AdminError, EngineError) as exc:
        return fail(str(exc))
    except (KazooException, KafkaException, DaemonError, LocalServerError, OSError) as exc:
        return fail(f"{type(exc).__name__}: {exc}")
    except KeyboardInterrupt:
        return 130
    finally:
        if started:
            try:
                node_control.down(args.dir)
            except state_file.ClusterError as exc:  # must not hide the run's own outcome or error
                logging.getLogger("chaos").error("stopping the cluster in %s: %s", args.dir, exc)
    summary(Console(), result)
    return 0 if result.ok else 1


def _unusable(exc: ToolsMissing) -> int:
    """Kafka's tools cannot run here: one ``error:`` line, exit 2, as for an option that cannot be met."""
    fail(str(exc))
    return 2


def campaign_command(args: argparse.Namespace) -> int:
    """Exit 0 when every run was ok; the summary is ``DIR/campaign.json``."""
    from chaos.campaign import CampaignConfig, campaign

    _logging()
    layout = launcher.Layout(
        zookeeper_nodes=args.zookeeper_nodes, netns=args.netns, kafka_brokers=args.kafka_brokers
    )
    template = RunConfig(
        directory=args.dir,
        duration_s=args.duration,
        faults=args.faults,
        interval_s=args.interval,
        rate=args.rate,
        overlap=args.overlap,
    )
    try:
        result = campaign(CampaignConfig(args.dir.resolve(), args.runs, args.first_seed, layout, template))
    except (ChaosError, state_file.ClusterError, AdminError) as exc:
        return fail(str(exc))
    print(json.dumps({k: v for k, v in result.items() if k != "results"}, indent=2))
    return 0 if result["ok"] == result["runs"] else 1


def summary(console: Console, result: RunResult) -> None:
    v = result.verdict
    table = Table(title=f"chaos {result.run_id} (seed {result.seed})")
    for column in ("acked", "failed", "consumed", "lost", "duplicated", "misplaced", "faults"):
        table.add_column(column, justify="right")
    duplicated = f"{len(v.duplicated)} ({len(v.resent)} resent)" if v.resent else str(len(v.duplicated))
    counts = (v.acked, v.failed, v.consumed, len(v.lost), duplicated, len(v.misplaced), v.faults)
    table.add_row(*map(str, counts))
    console.print(table)
    problems = (("lost", v.lost), ("duplicated", v.unexplained_duplicates), ("misplaced", v.misplaced))
    for name, values in problems:
        if values:
            console.print(f"[red]{name}[/]: {_some(values)}")
    if v.divergent:
        console.print(f"[red]read back with two values[/]: {v.divergent[:SHOWN]}")
    if v.resent:
        console.print(
            f"[yellow]resent by the producer[/] (a copy from a fenced leader's unanswered request, "
            f"then the acknowledged one; not the cluster's fault): {_some(v.resent)}"
        )
    _control_plane(console, result)
    if result.controllers.get("kafka"):
        console.print(
            f"controller epochs held: {result.controllers['ours']} by ours, "
            f"{result.controllers['kafka']} by Kafka brokers"
        )
    if v.acked_acks1:
        console.print(
            f"acks=1: {v.acked_acks1} acknowledged, {len(v.lost_acks1)} not read back where acknowledged "
            "(allowed: only the leader had them when they were acknowledged)"
        )
    _group(console, v)
    _transactions(console, result.txn)
    if result.crashed:
        console.print(f"[yellow]not running without a fault (see their logs)[/]: {', '.join(result.crashed)}")
    if v.ok:
        console.print("[green]ok[/]: every acknowledged record was read back once, where it was acknowledged")

    console.print(f"run directory: {result.run_dir}")


def _group(console: Console, v: Verdict) -> None:
    """What the run's consumer group consumed and committed."""
    if not v.group_consumed:
        return
    console.print(
        f"consumer group: {v.group_consumed} records consumed, {len(v.group_missed)} acknowledged ones "
        f"never reached it, {len(v.commits_backwards)} commits went back"
    )
    if v.group_missed:
        console.print(f"[red]never consumed by the group[/]: {_some(v.group_missed)}")
    if v.commits_backwards:
        console.print(f"[red]committed offsets went back[/]: {_some(v.commits_backwards)}")


def _transactions(console: Console, t: TxnVerdict) -> None:
    """The transactional workload: outcomes, isolation, exactly-once (``chaos.txn_verdict``)."""
    if not t.ran:
        return
    outcomes = ", ".join(f"{n} {o}" for o, n in sorted(t.outcomes.items()))
    console.print(f"transactions: {outcomes}; the transform loop committed {t.transformed}")
    for label, found in (
        ("aborted yet visible to read_committed", t.aborted_visible),
        ("committed yet invisible to read_committed", t.committed_missing),
        ("committed and lost", t.committed_lost),
        ("transactions visible in part", t.partial),
        ("inputs transformed more than once", t.duplicated),
        ("acknowledged inputs never transformed", t.untransformed),
        ("inputs on the wrong side of the committed offset", t.offsets_wrong),
    ):
        if found:
            console.print(f"[red]{label}[/]: {_some(found)}")
    if t.ok:
        console.print(
            "[green]ok[/]: no aborted record visible, committed transactions whole, each input once "
            "with its offsets"
        )


def _control_plane(console: Console, result: RunResult) -> None:
    """The safety rules, the replicas' consistency and the availability figures (``chaos.safety``,
    ``cluster.verify_replicas``, ``chaos.availability``)."""
    for fault, figures in sorted(result.availability.items()):
        console.print(
            f"{fault}: longest without a controller {figures['without_controller_s']:.1f} s, "
            f"longest a partition was without a working leader {figures['leaderless_s']:.1f} s"
        )
    for rule in result.unsafe:
        console.print(f"[red]unsafe[/]: {rule}")
    for replica in result.inconsistent[:SHOWN]:
        console.print(f"[red]inconsistent replica[/]: {replica}")
    if not result.unsafe and not result.inconsistent:
        console.print(
            "[green]ok[/]: one leader per leader epoch, growing epochs, no older controller obeyed, one "
            "active controller after each fault; every replica holds its leader's batches"
        )


def _some(values: Sequence[str]) -> str:
    more = f" and {len(values) - SHOWN} more" if len(values) > SHOWN else ""
    return ", ".join(values[:SHOWN]) + more


def list_command(args: argparse.Namespace) -> int:
    runs = sorted((args.dir / "chaos").glob("run-*/"))
    if not runs:
        print(f"no chaos runs in {args.dir / 'chaos'}")
        return 0
    rows = []
    for run_dir in runs:
        lines = list(read_lines(run_dir / "events.jsonl", run_dir / "history.jsonl"))
        started = next((e for e in lines if e.get("kind") == "run_started"), {})
        finished = next((e for e in lines if e.get("kind") == "run_finished"), None)
        v = judge(lines)
        checked = finished is not None  # without the read-back, nothing can be called lost
        rows.append(
            (
                run_dir.name,
                f"{finished['duration_s']:.0f} s" if finished is not None else "unfinished",
                v.acked,
                v.failed,
                len(v.lost) if checked else "-",
                len(v.duplicated) if checked else "-",
                v.faults,
                started.get("seed"),
            )
        )
    headers = ("RUN", "DURATION", "ACKED", "FAILED", "LOST", "DUPLICATED", "FAULTS", "SEED")
    print_table(headers, rows, title=f"chaos runs in {args.dir / 'chaos'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
