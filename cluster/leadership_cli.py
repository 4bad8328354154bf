"""``python -m cluster elect-leaders|reassign``: leadership moved on request, as Kafka's tools do.

``elect-leaders`` is kafka-leader-election.sh: ``/admin/preferred_replica_election`` through ZooKeeper, or
ElectLeaders (preferred or unclean) through the brokers' Admin API. ``reassign`` is
kafka-reassign-partitions.sh: ``--generate`` a plan, ``--execute`` it, ``--verify`` it
(``zkstore.controller_requests``; plans are read and checked by ``placement.plans``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cluster import kafka_flags
from cluster.admin_cli import (
    fail,
    guarded,
    kafka_client,
    print_json,
    print_table,
    usage_error,
    with_zookeeper,
)
from placement.errors import AdminError
from placement.plans import parse_reassignment_plan
from zkstore import controller_requests
from zkstore.controller_requests import Plan, ReassignmentStatus, plan_json
from zkstore.znodes import TopicPartition

__all__ = ["register"]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``elect-leaders`` and ``reassign`` to ``python -m cluster``'s subparsers."""
    elect = commands.add_parser(
        "elect-leaders",
        parents=[common],
        help="preferred or unclean leader elections (kafka-leader-election.sh's flags; all partitions "
        "by default)",
    )
    elect.add_argument(
        "--election-type",
        "--type",
        dest="election_type",
        type=str.upper,
        choices=("PREFERRED", "UNCLEAN"),
        default="PREFERRED",
        help="UNCLEAN takes a live replica outside the ISR when no ISR member lives (Admin API only)",
    )
    elect.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,...]",
        help="go through the brokers' Admin API (ElectLeaders) instead of /admin/preferred_replica_election",
    )
    elect.add_argument("--topic")
    elect.add_argument("--partition", type=int)
    elect.add_argument("--all-topic-partitions", action="store_true", help="every partition (the default)")
    elect.set_defaults(run=guarded(run_elect_leaders))

    reassign = commands.add_parser("reassign", parents=[common], help="move partitions' replicas")
    mode = reassign.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="start the plan's reassignments (the default)")
    mode.add_argument("--generate", action="store_true", help="propose a plan for --topics over --brokers")
    mode.add_argument("--verify", action="store_true", help="status of the plan's reassignments")
    reassign.add_argument("--plan", type=Path, help="a plan in Kafka's JSON reassignment format")
    reassign.add_argument("--topics", help="with --generate: T1,T2,...")
    reassign.add_argument("--brokers", help="with --generate: 1,2,3")
    reassign.set_defaults(run=guarded(run_reassign))


def run_elect_leaders(args: argparse.Namespace) -> int:
    if args.partition is not None and args.topic is None:
        return usage_error("--partition needs --topic")
    if args.bootstrap_server:
        return _elect_through_brokers(args)
    if args.election_type == "UNCLEAN":
        return usage_error("unclean elections go through the Admin API: give --bootstrap-server")
    partitions = with_zookeeper(
        args, lambda zk: controller_requests.request_preferred_election(zk, args.topic, args.partition)
    )
    if args.json:
        print_json(
            {
                "type": args.election_type.lower(),
                "partitions": [{"topic": t, "partition": p} for t, p in partitions],
            }
        )
    else:
        print(f"Requested a preferred leader election for {len(partitions)} partitions:")
        print(", ".join(map(str, partitions)))
    return 0


def _elect_through_brokers(args: argparse.Namespace) -> int:
    """kafka-leader-election.sh's output: the partitions elected, those that needed nothing, failures."""
    partitions = None
    if args.topic is not None:
        if args.partition is not None:
            partitions = [(args.topic, args.partition)]
        else:  # every partition of the topic, from the brokers' metadata
            partitions = [(t, p) for t, p, *_ in kafka_flags.describe(kafka_client(args), args.topic)]
    outcomes = kafka_flags.elect_leaders(kafka_client(args), args.election_type == "UNCLEAN", partitions)
    elected = sorted(tp for tp, e in outcomes.items() if e is None)
    needless = sorted(tp for tp, e in outcomes.items() if e == "ELECTION_NOT_NEEDED")
    failed = {tp: e for tp, e in sorted(outcomes.items()) if e not in (None, "ELECTION_NOT_NEEDED")}
    kind = args.election_type
    if args.json:
        print_json(
            {
                "type": kind.lower(),
                "elected": [{"topic": t, "partition": p} for t, p in elected],
                "not_needed": [{"topic": t, "partition": p} for t, p in needless],
                "failed": [{"topic": t, "partition": p, "error": e} for (t, p), e in failed.items()],
            }
        )
    else:

        def names(tps: list[tuple[str, int]]) -> str:
            return ", ".join(f"{t}-{p}" for t, p in tps)

        if elected:
            print(f"Successfully completed leader election ({kind}) for partitions {names(elected)}")
        if needless:
            print(f"Valid replica already elected for partitions {names(needless)}")
        for (t, p), error in failed.items():
            print(f"Error completing leader election ({kind}) for partition {t}-{p}: {error}")
    return 1 if failed else 0


def _read_plan(path: Path) -> Plan:
    return parse_reassignment_plan(path.read_text(encoding="utf-8"), TopicPartition)


def _ids(text: str, what: str) -> list[int]:
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise AdminError(f"{what} must be comma-separated integers, got {text!r}") from None


def run_reassign(args: argparse.Namespace) -> int:
    if args.generate:
        if not args.topics or not args.brokers:
            return usage_error("--generate needs --topics and --brokers")
        topics = [t.strip() for t in args.topics.split(",") if t.strip()]
        brokers = _ids(args.brokers, "--brokers")
        current, proposed = with_zookeeper(
            args, lambda zk: controller_requests.generate_reassignment(zk, topics, brokers)
        )
        if args.json:
            print_json({"current": plan_json(current), "proposed": plan_json(proposed)})
        else:
            print("Current partition replica assignment")
            print(json.dumps(plan_json(current)))
            print()
            print("Proposed partition reassignment configuration")
            print(json.dumps(plan_json(proposed)))
        return 0
    if args.plan is None:
        return usage_error("--plan is required (or --generate)")
    plan = _read_plan(args.plan)
    if args.verify:
        return _verify(args, plan)
    current = with_zookeeper(args, lambda zk: controller_requests.request_reassignment(zk, plan))
    if args.json:
        print_json({"current": plan_json(current), "proposed": plan_json(plan)})
    else:
        print("Current partition replica assignment")
        print()
        print(json.dumps(plan_json(current)))
        print()
        print("Save this to use as the --plan during rollback")
        print(f"Successfully started partition reassignments for {','.join(map(str, sorted(plan)))}")
    return 0


def _verify(args: argparse.Namespace, plan: Plan) -> int:
    """Exit code 1 when a reassignment failed; 0 while they are complete or still in progress."""
    statuses = with_zookeeper(args, lambda zk: controller_requests.verify_reassignment(zk, plan))
    if args.json:
        print_json(
            {
                "partitions": [
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "status": str(status),
                        "replicas": list(replicas),
                        "target": list(plan[tp]),
                    }
                    for tp, (status, replicas) in statuses.items()
                ]
            }
        )
    else:
        rows = [
            (tp.topic, tp.partition, str(status), replicas, plan[tp])
            for tp, (status, replicas) in statuses.items()
        ]
        print_table(("TOPIC", "PARTITION", "STATUS", "REPLICAS", "TARGET"), rows)
    failed = [str(tp) for tp, (status, _) in statuses.items() if status is ReassignmentStatus.FAILED]
    if failed:
        return fail(f"reassignment failed for {', '.join(failed)}")
    return 0
