"""``python -m cluster topics create|describe|list|delete|alter``: kafka-topics.sh for any cluster.

Through ZooKeeper (``zkstore.topic_writes``, ``zkstore.cluster_reads``), as ``kafka-topics --zookeeper``
does, or through the brokers' Admin API with ``--bootstrap-server`` (``cluster.kafka_flags``), as Kafka
3.x's tool does. Where the replicas go is ``placement/``'s decision either way.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from cluster import kafka_flags
from cluster.admin_cli import (
    config_pair,
    guarded,
    kafka_client,
    print_json,
    print_table,
    usage_error,
    with_zookeeper,
)
from placement.assignment import parse_replica_assignment
from zkstore import cluster_reads, topic_writes, znodes

__all__ = ["register"]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``topics`` and its actions to ``python -m cluster``'s subparsers."""
    topics = commands.add_parser(
        "topics",
        help="create, describe, list, delete and alter topics (also in kafka-topics.sh's spelling: "
        "--create --topic T, ...)",
    )
    actions = topics.add_subparsers(dest="topics_action", required=True, metavar="ACTION")
    through = argparse.ArgumentParser(add_help=False, parents=[common])
    through.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,...]",
        help="go through the brokers' Admin API (as Kafka 3.x's tools do) instead of ZooKeeper",
    )

    create = actions.add_parser("create", parents=[through], help="create a topic (kafka-topics --create)")
    create.add_argument("topic")
    create.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config (repeatable)"
    )
    create.add_argument("--partitions", type=int)
    create.add_argument("--replication-factor", type=int)
    create.add_argument(
        "--replica-assignment",
        metavar="1:2,2:3,...",
        help="replicas per partition (partitions split by ',', replicas by ':'); the first leads",
    )
    create.set_defaults(run=guarded(run_topics_create))

    describe = actions.add_parser(
        "describe", parents=[through], help="partitions: leader, epoch, ISR, replicas"
    )
    describe.add_argument("topic", nargs="?")
    describe.add_argument(
        "--under-replicated-partitions", action="store_true", help="only partitions whose ISR lacks a replica"
    )
    describe.add_argument(
        "--unavailable-partitions", action="store_true", help="only partitions without a leader"
    )
    describe.set_defaults(run=guarded(run_topics_describe))

    listing = actions.add_parser("list", parents=[through], help="every topic")
    listing.set_defaults(run=guarded(run_topics_list))

    delete = actions.add_parser("delete", parents=[through], help="mark a topic for deletion")
    delete.add_argument("topic")
    delete.set_defaults(run=guarded(run_topics_delete))

    alter = actions.add_parser("alter", parents=[through], help="add partitions to a topic")
    alter.add_argument("topic")
    alter.add_argument("--partitions", type=int, required=True, help="the new (larger) partition count")
    alter.set_defaults(run=guarded(run_topics_alter))


def run_topics_create(args: argparse.Namespace) -> int:
    assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
    if args.bootstrap_server:  # the brokers' defaults fill in what is not given, as in Kafka 3.x
        configs = dict(config_pair(c) for c in args.config)
        kafka_flags.create(
            kafka_client(args), args.topic, args.partitions, args.replication_factor, assignment, configs
        )
        print(f"Created topic {args.topic}.")
        return 0
    if args.config:
        return usage_error("--config needs --bootstrap-server (topic configs go through the Admin API)")
    if args.replica_assignment is None and (args.partitions is None or args.replication_factor is None):
        return usage_error("--partitions and --replication-factor are required without --replica-assignment")
    created = with_zookeeper(
        args,
        lambda zk: topic_writes.create_new_topic(
            zk, args.topic, args.partitions, args.replication_factor, assignment
        ),
    )
    topic_id = znodes.format_topic_id(created.topic_id) if created.topic_id else None
    if args.json:
        print_json(
            {
                "topic": created.topic,
                "topic_id": topic_id,
                "partitions": {str(p): list(r) for p, r in sorted(created.partitions.items())},
            }
        )
    else:
        print(f"Created topic {created.topic} (topic id {topic_id}).")
        print_table(("PARTITION", "REPLICAS"), sorted(created.partitions.items()))
    return 0


def _topic_rows(topics: Sequence[cluster_reads.TopicSummary]) -> list[tuple[object, ...]]:
    return [
        (
            t.topic,
            t.partition_count,
            t.replication_factor,
            t.topic_id,
            "marked for deletion" if t.marked_for_deletion else "",
        )
        for t in topics
    ]


_TOPIC_HEADERS = ("TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "TOPIC-ID", "STATE")


def _leader(p: cluster_reads.PartitionDescription) -> object:
    if p.leader is None:
        return "(no state)"
    return "none" if p.leader == znodes.NO_LEADER else p.leader


def run_topics_describe(args: argparse.Namespace) -> int:
    if args.bootstrap_server:
        served = kafka_flags.describe(kafka_client(args), args.topic)
        if args.under_replicated_partitions:
            served = [r for r in served if len(r[3]) < len(r[4])]
        if args.unavailable_partitions:
            served = [r for r in served if r[2] < 0]
        print_table(("TOPIC", "PARTITION", "LEADER", "ISR", "REPLICAS"), served)
        return 0
    found = with_zookeeper(args, lambda zk: cluster_reads.describe(zk, [args.topic] if args.topic else None))
    if args.under_replicated_partitions or args.unavailable_partitions:
        found = cluster_reads.TopicsDescription(
            found.topics,
            [
                p
                for p in found.partitions
                if (not args.under_replicated_partitions or len(p.isr) < len(p.replicas))
                and (not args.unavailable_partitions or p.leader in (None, znodes.NO_LEADER))
            ],
        )
    if args.json:
        by_topic: dict[str, list[dict[str, Any]]] = {t.topic: [] for t in found.topics}
        for p in found.partitions:
            by_topic[p.topic].append({k: v for k, v in asdict(p).items() if k != "topic"})
        print_json({"topics": [{**asdict(t), "partitions": by_topic[t.topic]} for t in found.topics]})
        return 0
    print_table(_TOPIC_HEADERS, _topic_rows(found.topics))
    if not found.partitions:
        return 0
    headers = ["TOPIC", "PARTITION", "LEADER", "LEADER-EPOCH", "ISR", "REPLICAS"]
    moving = any(p.adding_replicas or p.removing_replicas for p in found.partitions)
    if moving:
        headers += ["ADDING", "REMOVING"]
    rows = []
    for p in found.partitions:
        row = [p.topic, p.partition, _leader(p), p.leader_epoch, p.isr, p.replicas]
        rows.append([*row, p.adding_replicas, p.removing_replicas] if moving else row)
    print()
    print_table(headers, rows)
    return 0


def run_topics_list(args: argparse.Namespace) -> int:
    if args.bootstrap_server:
        for name in kafka_flags.list_topics(kafka_client(args)):
            print(name)
        return 0
    topics = with_zookeeper(args, cluster_reads.list_topics)
    if args.json:
        print_json({"topics": [asdict(t) for t in topics]})
    else:
        print_table(_TOPIC_HEADERS, _topic_rows(topics))
    return 0


def run_topics_delete(args: argparse.Namespace) -> int:
    if args.bootstrap_server:
        kafka_flags.delete(kafka_client(args), args.topic)
        print(f"Deleted topic {args.topic}.")
        return 0
    with_zookeeper(args, lambda zk: topic_writes.delete_topic(zk, args.topic))
    if args.json:
        print_json({"topic": args.topic, "marked_for_deletion": True})
    else:
        print(f"Topic {args.topic} is marked for deletion.")
        print("Note: This will have no impact if delete.topic.enable is not set to true.")
    return 0


def run_topics_alter(args: argparse.Namespace) -> int:
    if args.bootstrap_server:
        kafka_flags.alter(kafka_client(args), args.topic, args.partitions)
        print(f"Topic {args.topic} has {args.partitions} partitions.")
        return 0
    added = with_zookeeper(args, lambda zk: topic_writes.add_partitions(zk, args.topic, args.partitions))
    if args.json:
        print_json(
            {
                "topic": args.topic,
                "partitions": args.partitions,
                "added": {str(p): list(r) for p, r in sorted(added.items())},
            }
        )
    else:
        print(f"Added {len(added)} partitions to {args.topic} ({args.partitions} in all).")
        print_table(("PARTITION", "REPLICAS"), sorted(added.items()))
    return 0
