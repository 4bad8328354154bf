"""``python -m cluster consumer-groups``: kafka-consumer-groups.sh's list, describe (lag per
partition), reset-offsets and delete, through the brokers' group APIs (confluent-kafka's
AdminClient), with Kafka's flags and column names."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from cluster import admin_cli, kafka_flags
from cluster.kafka_flags import TIMEOUT_S
from placement.errors import AdminError

NO_OFFSET = -1001
"""librdkafka's OFFSET_INVALID: the group has committed nothing for the partition."""


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    groups = commands.add_parser(
        "consumer-groups",
        parents=[common],
        help="list, describe (lag per partition), reset offsets of and delete consumer groups "
        "(kafka-consumer-groups.sh's flags)",
    )
    groups.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,...]",
        help="brokers to ask (default: --dir's brokers, else the PLAINTEXT endpoints in ZooKeeper)",
    )
    mode = groups.add_mutually_exclusive_group(required=True)
    mode.add_argument("--list", action="store_true")
    mode.add_argument("--describe", action="store_true")
    mode.add_argument("--reset-offsets", action="store_true")
    mode.add_argument("--delete", action="store_true")
    groups.add_argument("--group")
    groups.add_argument("--topic", help="with --reset-offsets: TOPIC or TOPIC:P1,P2")
    groups.add_argument(
        "--all-topics", action="store_true", help="with --reset-offsets: every committed topic"
    )
    target = groups.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int)
    run = groups.add_mutually_exclusive_group()
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    run.add_argument("--dry-run", action="store_true", help="only show them (the default)")
    groups.set_defaults(run=admin_cli.guarded(run_groups))


@dataclass(frozen=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None


def run_groups(args: argparse.Namespace) -> int:
    brokers = admin_cli.kafka_client(args, admin_cli.bootstrap_servers(args))
    if args.list:
        groups = list_groups(brokers)
        if args.json:
            admin_cli.print_json(groups)
        else:
            print("\n".join(groups))
        return 0
    if not args.group:
        return admin_cli.usage_error("--group is required")
    if args.delete:
        client = kafka_flags.admin_client(brokers)  # held until the answer, or its requests are cancelled
        kafka_flags.result(client.delete_consumer_groups([args.group])[args.group])
        print(f"Deletion of requested consumer groups ('{args.group}') was successful.")
        return 0
    if args.describe:
        state, rows = describe_group(brokers, args.group)
        if args.json:
            admin_cli.print_json(
                {"group": args.group, "state": state, "partitions": [asdict(r) for r in rows]}
            )
            return 0
        if not rows:
            print(f"Consumer group '{args.group}' has no active members and no committed offsets ({state}).")
            return 0
        headers = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID")
        admin_cli.print_table(
            (*headers, "HOST", "CLIENT-ID"),
            [tuple(asdict(r).values()) for r in rows],
        )
        return 0
    return _reset(args, brokers)


def _state(description: Any) -> str:
    """A group description's state by Kafka's name (e.g. ``STABLE``, ``EMPTY``)."""
    state = description.state
    return str(state.name) if hasattr(state, "name") else str(state)


def list_groups(brokers: Mapping[str, str]) -> list[str]:
    client = kafka_flags.admin_client(brokers)
    listed = kafka_flags.result(client.list_consumer_groups())
    return sorted(g.group_id for g in listed.valid)


def _watermarks(
    brokers: Mapping[str, str], partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int, int]]:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({**brokers, "group.id": "python-m-cluster-lag", "enable.auto.commit": False})
    try:
        out = {}
        for topic, partition in partitions:
            try:
                out[topic, partition] = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), TIMEOUT_S
                )
            except KafkaException as exc:
                raise kafka_flags.AdminApiError(f"{exc.args[0].name()}: {topic}-{partition}") from None
        return out
    finally:
        consumer.close()


def _committed(brokers: Mapping[str, str], group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    client = kafka_flags.admin_client(brokers)
    found = kafka_flags.result(
        client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    )
    return {(tp.topic, tp.partition): tp.offset for tp in found.topic_partitions if tp.offset != NO_OFFSET}


def describe_group(brokers: Mapping[str, str], group: str) -> tuple[str, list[PartitionLag]]:
    """The group's state and, per partition it has committed or been assigned, offsets and lag."""
    client = kafka_flags.admin_client(brokers)
    description = kafka_flags.result(client.describe_consumer_groups([group])[group])
    owners: dict[tuple[str, int], Any] = {}
    for member in description.members:
        for tp in member.assignment.topic_partitions if member.assignment else []:
            owners[tp.topic, tp.partition] = member
    committed = _committed(brokers, group)
    partitions = sorted(set(committed) | set(owners))
    ends = _watermarks(brokers, partitions)
    rows = []
    for tp in partitions:
        current = committed.get(tp)
        end = ends[tp][1]
        owner = owners.get(tp)
        rows.append(
            PartitionLag(
                group,
                tp[0],
                tp[1],
                current,
                end,
                None if current is None else max(end - current, 0),
                owner.member_id if owner else None,
                owner.host if owner else None,
                owner.client_id if owner else None,
            )
        )
    return _state(description), rows


def _reset(args: argparse.Namespace, brokers: Mapping[str, str]) -> int:
    if not (args.to_earliest or args.to_latest or args.to_offset is not None):
        return admin_cli.usage_error("--reset-offsets needs --to-earliest, --to-latest or --to-offset N")
    if not (args.topic or args.all_topics):
        return admin_cli.usage_error("--reset-offsets needs --topic or --all-topics")
    client = kafka_flags.admin_client(brokers)
    description = kafka_flags.result(client.describe_consumer_groups([args.group])[args.group])
    if args.execute and description.members:
        raise AdminError(
            f"Assignments can only be reset if the group '{args.group}' is inactive, "
            f"but the current state is {_state(description)}."
        )
    if args.all_topics:
        partitions = sorted(_committed(brokers, args.group))
    else:
        topic, _, listed = args.topic.partition(":")
        if listed:
            partitions = [(topic, int(p)) for p in listed.split(",") if p.strip()]
        else:
            partitions = [(t, p) for t, p, *_ in kafka_flags.describe(brokers, topic)]
    marks = _watermarks(brokers, partitions)
    targets = {}
    for tp in partitions:
        low, high = marks[tp]
        wanted = low if args.to_earliest else high if args.to_latest else args.to_offset
        targets[tp] = min(max(wanted, low), high)  # Kafka clamps an offset outside the log
    if args.execute:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        request = ConsumerGroupTopicPartitions(
            args.group, [TopicPartition(t, p, o) for (t, p), o in targets.items()]
        )
        kafka_flags.result(client.alter_consumer_group_offsets([request])[args.group])
    rows = [(args.group, t, p, o) for (t, p), o in sorted(targets.items())]
    if args.json:
        admin_cli.print_json(
            {
                "executed": bool(args.execute),
                "offsets": [{"topic": t, "partition": p, "offset": o} for _, t, p, o in rows],
            }
        )
    else:
        admin_cli.print_table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), rows)
    return 0
