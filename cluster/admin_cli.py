"""``python -m cluster topics|brokers|controller|elect-leaders|reassign|produce|consume``.

What Kafka users know from kafka-topics.sh --zookeeper, kafka-leader-election.sh,
kafka-reassign-partitions.sh and the console producer/consumer, for any cluster in Kafka's ZooKeeper
layout. The ZooKeeper work is in :mod:`zkstore.admin`; this module parses arguments and prints: tables
for people (rich at a terminal, aligned plain text when piped), ``--json`` for scripts. An error is one
``error: ...`` line on stderr and exit code 1; argparse gives 2 for usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kazoo.exceptions import KazooException

from cluster import kafka_flags, launcher
from daemon.config import ConfigError, parse_properties
from zkstore import admin, znodes
from zkstore.admin import AdminError
from zkstore.aio import AsyncZooKeeper
from zkstore.client_config import load_zk_security

__all__ = [
    "ConsumedRecord",
    "ProduceReport",
    "consume_records",
    "format_table",
    "produce_records",
    "register",
]

if TYPE_CHECKING:  # confluent-kafka is imported when a command needs it: the CLI starts faster
    from confluent_kafka import Consumer, KafkaError, Message

DEFAULT_ZOOKEEPER = "127.0.0.1:2181"
ZOOKEEPER_ENV = "KAFKA_ZOOKEEPER_CONNECT"
CONSUMER_GROUP = "python-m-cluster-consume"
UNASSIGNED_PARTITION = -1
"""librdkafka's RD_KAFKA_PARTITION_UA: let the partitioner choose."""
"""librdkafka requires a group.id even for assign(); nothing is ever committed under it."""
CLIENT_LISTENER = "PLAINTEXT"

_T = TypeVar("_T")
Run = Callable[[argparse.Namespace], int]


# ----------------------------------------------------------------------------------------------------
# Parser


def common_options() -> argparse.ArgumentParser:
    """--zookeeper, --zk-config, --dir and --json, which every admin command takes."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        help=f"ZooKeeper connect string (default: --dir's, else ${ZOOKEEPER_ENV}, else the cluster in "
        f"{launcher.DEFAULT_DIR} if one was started there, else {DEFAULT_ZOOKEEPER})",
    )
    common.add_argument(
        "--zk-config",
        type=Path,
        metavar="FILE",
        help="properties file with the zookeeper.* security keys (zookeeper.auth.digest, "
        "zookeeper.ssl.*), for a ZooKeeper with ACLs or TLS (Kafka tools' --zk-tls-config-file)",
    )
    common.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="librdkafka properties (security.protocol, sasl.*, ssl.*) for commands that reach the brokers "
        "(default: a secure local cluster's client.properties)",
    )
    common.add_argument("--dir", type=Path, help="a local cluster's directory: read DIR/cluster.json")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    return common


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the admin subcommands to ``python -m cluster``'s subparsers."""
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

    brokers = commands.add_parser(
        "brokers", parents=[common], help="live brokers: epochs (czxids), endpoints"
    )
    brokers.set_defaults(run=guarded(run_brokers))

    controller = commands.add_parser("controller", parents=[common], help="active controller and its epoch")
    controller.set_defaults(run=guarded(run_controller))

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

    client = argparse.ArgumentParser(add_help=False, parents=[common])
    client.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT,...",
        help="brokers to connect to (default: --dir's brokers, else the PLAINTEXT endpoints in ZooKeeper)",
    )
    client.add_argument("--topic", required=True)
    client.add_argument("--partition", type=int)

    produce = commands.add_parser(
        "produce", parents=[client], help="produce stdin's lines (or --count records) with confluent-kafka"
    )
    produce.add_argument("--acks", choices=("all", "1", "0"), default="all")
    produce.add_argument("--count", type=int, help="generate this many records instead of reading stdin")
    produce.add_argument("--key-separator", help="split each line into key and value at this string")
    produce.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for acknowledgements")
    produce.set_defaults(run=guarded(run_produce))

    consume = commands.add_parser(
        "consume", parents=[client], help="print records: partition, offset, key, value (tab-separated)"
    )
    consume.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    consume.add_argument("--max-messages", type=int, help="stop after this many records")
    consume.add_argument("--timeout", type=float, help="stop after this many seconds without a record")
    consume.set_defaults(run=guarded(run_consume))


def guarded(run: Run) -> Run:
    """Turn every foreseeable failure into one ``error:`` line and exit code 1."""

    @functools.wraps(run)
    def run_guarded(args: argparse.Namespace) -> int:
        _quiet_logging()
        try:
            return run(args)
        except (AdminError, ConfigError, launcher.ClusterError, kafka_flags.AdminApiError) as exc:
            return _fail(str(exc))
        except KazooException as exc:
            return _fail(f"ZooKeeper: {type(exc).__name__} {exc}".rstrip())
        except OSError as exc:
            return _fail(str(exc))
        except KeyboardInterrupt:
            return 130  # the shell's code for SIGINT; the user knows why

    return run_guarded


def _quiet_logging() -> None:
    """Outside a host that configured logging, show warnings (a corrupt znode) but not kazoo's retries."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="warning: %(name)s: %(message)s")
        logging.getLogger("kazoo").setLevel(logging.ERROR)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def usage_error(message: str) -> int:
    """A usage error found after parsing (argument combinations): exit code 2, as argparse's own."""
    print(f"error: {message}", file=sys.stderr)
    return 2


# ----------------------------------------------------------------------------------------------------
# Where the cluster is


def _local_cluster(args: argparse.Namespace) -> Path | None:
    """--dir, else ``make run``'s cluster when neither --zookeeper nor $KAFKA_ZOOKEEPER_CONNECT says
    otherwise (so the README's commands need no flags)."""
    if args.dir is not None or args.zookeeper or os.environ.get(ZOOKEEPER_ENV):
        return args.dir
    return launcher.DEFAULT_DIR if launcher.state_path(launcher.DEFAULT_DIR).exists() else None


def _zookeeper(args: argparse.Namespace) -> str:
    """--zookeeper, else the local cluster's (see _local_cluster), else $KAFKA_ZOOKEEPER_CONNECT, else
    Kafka's usual local address."""
    if args.zookeeper:
        return args.zookeeper
    directory = _local_cluster(args)
    if directory is not None:
        connect = launcher.load_state(directory).get("zookeeper_connect")
        if not isinstance(connect, str) or not connect:
            raise AdminError(f"{launcher.state_path(directory)} has no zookeeper_connect")
        return connect
    return os.environ.get(ZOOKEEPER_ENV) or DEFAULT_ZOOKEEPER


def _zk_config(args: argparse.Namespace) -> Path | None:
    """--zk-config, else that of the local cluster whose ZooKeeper is used (a secure one has one)."""
    given: Path | None = getattr(args, "zk_config", None)
    if given is not None or args.zookeeper:
        return given
    directory = _local_cluster(args)
    return launcher.zk_config(launcher.load_state(directory)) if directory is not None else None


def with_zookeeper(args: argparse.Namespace, work: Callable[[AsyncZooKeeper], Awaitable[_T]]) -> _T:
    zk_config = _zk_config(args)
    security = load_zk_security(zk_config) if zk_config is not None else None

    async def session() -> _T:
        async with admin.connect(_zookeeper(args), security=security) as zk:
            return await work(zk)

    return asyncio.run(session())


def kafka_client(args: argparse.Namespace, servers: str | None = None) -> dict[str, str]:
    """librdkafka settings reaching the brokers: ``bootstrap.servers`` (--bootstrap-server, else
    ``servers``) and the security settings of --command-config, else of the local secure cluster."""
    settings: dict[str, str] = {}
    path: Path | None = getattr(args, "command_config", None)
    if path is None and not args.zookeeper:
        directory = _local_cluster(args)
        path = launcher.client_config(launcher.load_state(directory)) if directory is not None else None
    if path is not None:
        try:
            settings = parse_properties(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise AdminError(f"--command-config: cannot read {path}: {exc.strerror or exc}") from None
        ca = settings.get("ssl.ca.location")
        if ca and not Path(ca).is_absolute():  # relative to the file, as compose's client.properties has it
            settings["ssl.ca.location"] = str(path.parent / ca)
    chosen = args.bootstrap_server or servers
    if chosen:  # a file naming its own brokers yields to the ones given or found
        settings["bootstrap.servers"] = chosen
    if not settings.get("bootstrap.servers"):
        raise AdminError("no brokers to connect to: give --bootstrap-server")
    return settings


def bootstrap_servers(args: argparse.Namespace) -> str:
    """--bootstrap-server, else the PLAINTEXT listeners of --dir's brokers, else those in ZooKeeper."""
    if args.bootstrap_server:
        return args.bootstrap_server
    directory = _local_cluster(args)
    listener = CLIENT_LISTENER
    if directory is not None:
        state = launcher.load_state(directory)
        listeners = [
            ln for p in state["processes"] if p["role"] == "broker" for ln in p.get("listeners") or []
        ]
        listener = launcher.client_listener(state)
        where = str(launcher.state_path(directory))
    else:
        brokers = with_zookeeper(args, admin.broker_list)
        listeners = [ep for b in brokers for ep in b.endpoints]
        where = f"/brokers/ids at {_zookeeper(args)}"
    servers = launcher.client_endpoints(listeners, listener)
    if not servers:
        raise AdminError(f"no broker with a {listener} listener in {where}; give --bootstrap-server")
    return ",".join(servers)


# ----------------------------------------------------------------------------------------------------
# Output


def format_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Columns aligned with two spaces, '-' for empty cells: easy to read and to cut/awk."""
    cells = [list(headers), *([_cell(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def _cell(value: object) -> str:
    if value is None or value == "" or value == ():
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    return str(value)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> None:
    """rich at a terminal when installed; plain aligned text otherwise (pipes, tests, no rich)."""
    if sys.stdout.isatty():
        try:
            from rich.console import Console
            from rich.table import Table
            from rich.text import Text
        except ImportError:
            pass
        else:
            table = Table(*headers, title=title)
            for row in rows:
                table.add_row(*(Text(_cell(v)) for v in row))
            Console().print(table)
            return
    if title:
        print(title)
    print(format_table(headers, rows))


def print_json(value: object) -> None:
    print(json.dumps(value, indent=2))


# ----------------------------------------------------------------------------------------------------
# topics


def run_topics_create(args: argparse.Namespace) -> int:
    assignment = admin.parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
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
        lambda zk: admin.create_new_topic(
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


def _topic_rows(topics: Sequence[admin.TopicSummary]) -> list[tuple[object, ...]]:
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


def _leader(p: admin.PartitionDescription) -> object:
    if p.leader is None:
        return "(no state)"
    return "none" if p.leader == znodes.NO_LEADER else p.leader


def config_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise AdminError(f"--config {text!r} is not KEY=VALUE")
    return key, value


def run_topics_describe(args: argparse.Namespace) -> int:
    if args.bootstrap_server:
        served = kafka_flags.describe(kafka_client(args), args.topic)
        if args.under_replicated_partitions:
            served = [r for r in served if len(r[3]) < len(r[4])]
        if args.unavailable_partitions:
            served = [r for r in served if r[2] < 0]
        print_table(("TOPIC", "PARTITION", "LEADER", "ISR", "REPLICAS"), served)
        return 0
    found = with_zookeeper(args, lambda zk: admin.describe(zk, [args.topic] if args.topic else None))
    if args.under_replicated_partitions or args.unavailable_partitions:
        found = admin.TopicsDescription(
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
    topics = with_zookeeper(args, admin.list_topics)
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
    with_zookeeper(args, lambda zk: admin.delete_topic(zk, args.topic))
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
    added = with_zookeeper(args, lambda zk: admin.add_partitions(zk, args.topic, args.partitions))
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


# ----------------------------------------------------------------------------------------------------
# brokers, controller


def run_brokers(args: argparse.Namespace) -> int:
    brokers = with_zookeeper(args, admin.broker_list)
    if args.json:
        print_json({"brokers": [asdict(b) for b in brokers]})
    else:
        rows = [(b.broker_id, b.epoch, f"0x{b.epoch:x}", b.endpoints, b.rack) for b in brokers]
        print_table(("ID", "EPOCH", "EPOCH-HEX", "ENDPOINTS", "RACK"), rows)
    return 0


def run_controller(args: argparse.Namespace) -> int:
    info = with_zookeeper(args, admin.controller_info)
    if args.json:
        print_json(asdict(info))
    else:
        row = (info.controller_id, info.epoch, info.epoch_zk_version, info.rpc_endpoint)
        print_table(("CONTROLLER-ID", "EPOCH", "EPOCH-ZK-VERSION", "RPC-ENDPOINT"), [row])
    return 0


# ----------------------------------------------------------------------------------------------------
# elect-leaders, reassign


def run_elect_leaders(args: argparse.Namespace) -> int:
    if args.partition is not None and args.topic is None:
        return usage_error("--partition needs --topic")
    if args.bootstrap_server:
        return _elect_through_brokers(args)
    if args.election_type == "UNCLEAN":
        return usage_error("unclean elections go through the Admin API: give --bootstrap-server")
    partitions = with_zookeeper(
        args, lambda zk: admin.request_preferred_election(zk, args.topic, args.partition)
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


def _read_plan(path: Path) -> admin.Plan:
    return admin.parse_reassignment_plan(path.read_text(encoding="utf-8"))


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
        current, proposed = with_zookeeper(args, lambda zk: admin.generate_reassignment(zk, topics, brokers))
        if args.json:
            print_json({"current": admin.plan_json(current), "proposed": admin.plan_json(proposed)})
        else:
            print("Current partition replica assignment")
            print(json.dumps(admin.plan_json(current)))
            print()
            print("Proposed partition reassignment configuration")
            print(json.dumps(admin.plan_json(proposed)))
        return 0
    if args.plan is None:
        return usage_error("--plan is required (or --generate)")
    plan = _read_plan(args.plan)
    if args.verify:
        return _verify(args, plan)
    current = with_zookeeper(args, lambda zk: admin.request_reassignment(zk, plan))
    if args.json:
        print_json({"current": admin.plan_json(current), "proposed": admin.plan_json(plan)})
    else:
        print("Current partition replica assignment")
        print()
        print(json.dumps(admin.plan_json(current)))
        print()
        print("Save this to use as the --plan during rollback")
        print(f"Successfully started partition reassignments for {','.join(map(str, sorted(plan)))}")
    return 0


def _verify(args: argparse.Namespace, plan: admin.Plan) -> int:
    """Exit code 1 when a reassignment failed; 0 while they are complete or still in progress."""
    statuses = with_zookeeper(args, lambda zk: admin.verify_reassignment(zk, plan))
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
    failed = [str(tp) for tp, (status, _) in statuses.items() if status is admin.ReassignmentStatus.FAILED]
    if failed:
        return _fail(f"reassignment failed for {', '.join(failed)}")
    return 0


# ----------------------------------------------------------------------------------------------------
# produce, consume (confluent-kafka against the brokers' client listeners)


@dataclass
class AcknowledgedRange:
    """Records acknowledged in one partition; no offsets with acks=0, where the broker sends no answer."""

    count: int = 0
    first_offset: int | None = None
    last_offset: int | None = None

    def add(self, offset: int | None) -> None:
        self.count += 1
        if offset is not None:
            self.first_offset = offset if self.first_offset is None else min(self.first_offset, offset)
            self.last_offset = offset if self.last_offset is None else max(self.last_offset, offset)


@dataclass
class ProduceReport:
    topic: str
    sent: int = 0
    acknowledged: int = 0
    partitions: dict[int, AcknowledgedRange] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def produce_records(
    brokers: Mapping[str, str],
    topic: str,
    records: Iterable[tuple[bytes | None, bytes]],
    *,
    partition: int | None = None,
    acks: str = "all",
    timeout_s: float = 30.0,
) -> ProduceReport:
    """Produce ``(key, value)`` records and wait for every delivery report.

    Idempotence is off: it needs InitProducerId, which these brokers do not serve. ``message.timeout.ms``
    bounds each record, so an unreachable leader ends in a delivery error instead of a hang.
    """
    from confluent_kafka import KafkaException, Producer

    report = ProduceReport(topic)
    config = {
        **brokers,
        "acks": acks,
        "enable.idempotence": False,
        "linger.ms": 5,
        "message.timeout.ms": max(1, int(timeout_s * 1000)),
    }
    try:
        producer = Producer(config)
    except KafkaException as exc:
        raise AdminError(f"cannot create a producer: {exc}") from None

    def delivered(err: Any, message: Any) -> None:
        if err is not None:
            report.errors.append(str(err))
            return
        report.acknowledged += 1
        offset = message.offset() if message.offset() >= 0 else None
        report.partitions.setdefault(message.partition(), AcknowledgedRange()).add(offset)

    chosen = UNASSIGNED_PARTITION if partition is None else partition
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=chosen, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                producer.poll(0.1)
        report.sent += 1
        producer.poll(0)
    remaining = producer.flush(timeout_s + 5.0)
    if remaining:
        report.errors.append(f"{remaining} records still unacknowledged after {timeout_s + 5.0:g} s")
    return report


def _stdin_records(separator: str | None) -> Iterator[tuple[bytes | None, bytes]]:
    for line in sys.stdin:
        text = line.rstrip("\r\n")
        if separator is not None and separator in text:
            key, _, value = text.partition(separator)
            yield key.encode(), value.encode()
        else:
            yield None, text.encode()


def run_produce(args: argparse.Namespace) -> int:
    if args.count is not None and args.count < 0:
        return usage_error("--count cannot be negative")
    brokers = kafka_client(args, bootstrap_servers(args))
    if args.count is not None:
        records: Iterable[tuple[bytes | None, bytes]] = (
            (None, f"record-{i}".encode()) for i in range(args.count)
        )
    else:
        records = _stdin_records(args.key_separator)
    report = produce_records(
        brokers, args.topic, records, partition=args.partition, acks=args.acks, timeout_s=args.timeout
    )
    if args.json:
        print_json(
            {
                "topic": report.topic,
                "sent": report.sent,
                "acknowledged": report.acknowledged,
                "partitions": [{"partition": p, **asdict(r)} for p, r in sorted(report.partitions.items())],
                "errors": report.errors,
            }
        )
    else:
        print(f"{report.acknowledged} of {report.sent} records acknowledged (acks={args.acks}).")
        rows = [(p, r.count, r.first_offset, r.last_offset) for p, r in sorted(report.partitions.items())]
        if rows:
            print_table(("PARTITION", "RECORDS", "FIRST-OFFSET", "LAST-OFFSET"), rows)
    if report.errors or report.acknowledged != report.sent:
        failed = report.sent - report.acknowledged
        first = report.errors[0] if report.errors else "no delivery report"
        return _fail(f"{failed} of {report.sent} records not acknowledged: {first}")
    return 0


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: str | None
    value: str | None


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def consume_records(
    brokers: Mapping[str, str],
    topic: str,
    on_record: Callable[[ConsumedRecord], None],
    *,
    partition: int | None = None,
    from_beginning: bool = False,
    max_messages: int | None = None,
    idle_timeout_s: float | None = None,
) -> int:
    """Read ``topic`` (or one partition) with assign(): no group membership, no commits; returns the count.

    Stops after ``max_messages`` records, or once no record has come for ``idle_timeout_s`` seconds (as the
    console consumer's --timeout-ms), else runs until interrupted.
    """
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition

    config = {
        **brokers,
        "group.id": CONSUMER_GROUP,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    }
    try:
        consumer = Consumer(config)
    except KafkaException as exc:
        raise AdminError(f"cannot create a consumer: {exc}") from None
    count = 0
    try:
        partitions = _partitions_to_read(consumer, brokers, topic, partition, idle_timeout_s)
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END
        consumer.assign([TopicPartition(topic, p, start) for p in partitions])
        last_record = time.monotonic()
        while max_messages is None or count < max_messages:
            wanted = 500 if max_messages is None else min(500, max_messages - count)
            batch = consumer.consume(num_messages=wanted, timeout=0.2)
            for message in batch:
                record = _record_of(message, topic)
                if record is not None:
                    count += 1
                    on_record(record)
            if batch:
                last_record = time.monotonic()
            elif idle_timeout_s is not None and time.monotonic() - last_record >= idle_timeout_s:
                break
    finally:
        consumer.close()
    return count


def _partitions_to_read(
    consumer: Consumer,
    brokers: Mapping[str, str],
    topic: str,
    partition: int | None,
    idle_timeout_s: float | None,
) -> list[int]:
    """The topic's partitions (or the one asked for), or an AdminError naming what is missing."""
    from confluent_kafka import KafkaException

    try:
        metadata = consumer.list_topics(topic, timeout=max(10.0, idle_timeout_s or 0.0))
    except KafkaException as exc:
        raise AdminError(f"no metadata for {topic} from {brokers['bootstrap.servers']}: {exc}") from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        reason = found.error.str() if found is not None and found.error is not None else "unknown topic"
        raise AdminError(f"topic {topic}: {reason}")
    partitions = sorted(found.partitions)
    if partition is None:
        return partitions
    if partition not in partitions:
        raise AdminError(f"topic {topic} has no partition {partition} (it has {len(partitions)})")
    return [partition]


def _record_of(message: Message, topic: str) -> ConsumedRecord | None:
    """The record a consumed message carries; None for a passing event (a partition's end)."""
    error = message.error()
    if error is not None:
        if not passing_consume_error(error):
            raise AdminError(f"consuming {topic}: {error.str()}")
        return None
    partition, offset = message.partition(), message.offset()
    if partition is None or offset is None:  # only error events lack them
        return None
    stamp_type, stamp = message.timestamp()
    return ConsumedRecord(
        topic, partition, offset, stamp if stamp_type else None, _text(message.key()), _text(message.value())
    )


def passing_consume_error(error: KafkaError) -> bool:
    """A consume error to read past: the end of a partition, or one librdkafka retries by itself."""
    from confluent_kafka import KafkaError

    # librdkafka's partition-end code, which confluent-kafka exposes under an underscore name.
    return bool(error.code() == KafkaError._PARTITION_EOF or error.retriable())  # noqa: SLF001


def run_consume(args: argparse.Namespace) -> int:
    if args.max_messages is not None and args.max_messages < 1:
        return usage_error("--max-messages must be at least 1")
    brokers = kafka_client(args, bootstrap_servers(args))

    def show(record: ConsumedRecord) -> None:
        if args.json:
            print(json.dumps(asdict(record)), flush=True)
        else:
            key = "null" if record.key is None else record.key
            value = "null" if record.value is None else record.value
            print(f"{record.partition}\t{record.offset}\t{key}\t{value}", flush=True)

    try:
        count = consume_records(
            brokers,
            args.topic,
            show,
            partition=args.partition,
            from_beginning=args.from_beginning,
            max_messages=args.max_messages,
            idle_timeout_s=args.timeout,
        )
    except KeyboardInterrupt:
        return 0
    if args.max_messages is not None and count < args.max_messages:
        return _fail(f"no record for {args.timeout:g} s: got {count} of {args.max_messages} messages")
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
