"""``python -m cluster configs``: kafka-configs.sh's describe and alter, for topics and brokers
(and users' SCRAM credentials, which ``users_cli`` handles).

``kafka-configs.sh --bootstrap-server B --entity-type topics --entity-name T --alter --add-config
retention.ms=60000`` works with the command name changed (``--topic T`` and ``--broker N`` are
Kafka's shorthands for the entity flags). With ``--bootstrap-server`` the work goes through the
brokers' Admin API (DescribeConfigs, IncrementalAlterConfigs); without it, topic configs are read and
written in ZooKeeper (``/config/topics/T`` and a ``/config/changes`` notification, Kafka's layout),
as ``kafka-configs.sh --zookeeper`` did.
"""

from __future__ import annotations

import argparse
from typing import Any

from admin.errors import AdminFailure
from admin.topic_configs import check_configs
from cluster import admin_cli, kafka_flags, users_cli
from placement.errors import AdminError
from zkstore import entity_configs, znodes
from zkstore.aio import AsyncZooKeeper

ENTITY_TYPES = {"topics": "TOPIC", "brokers": "BROKER"}
DYNAMIC_SOURCES = {"DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"}


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    configs = commands.add_parser(
        "configs",
        parents=[common],
        help="describe and alter topic and broker configs (kafka-configs.sh's flags)",
    )
    configs.add_argument(
        "--bootstrap-server", metavar="HOST:PORT[,...]", help="go through the brokers' Admin API"
    )
    configs.add_argument("--entity-type", choices=sorted([*ENTITY_TYPES, "users"]))
    configs.add_argument("--entity-name")
    configs.add_argument("--topic", help="shorthand for --entity-type topics --entity-name TOPIC")
    configs.add_argument("--broker", help="shorthand for --entity-type brokers --entity-name ID")
    mode = configs.add_mutually_exclusive_group(required=True)
    mode.add_argument("--describe", action="store_true")
    mode.add_argument("--alter", action="store_true")
    configs.add_argument(
        "--all", action="store_true", help="with --describe: every config, not only overrides"
    )
    configs.add_argument("--add-config", metavar="K1=V1,K2=[A,B],...", help="configs to set")
    configs.add_argument("--delete-config", metavar="K1,K2,...", help="configs to remove")
    configs.set_defaults(run=admin_cli.guarded(run_configs))


def split_configs(text: str) -> dict[str, str]:
    """``a=1,b=[x,y]`` -> {"a": "1", "b": "x,y"}: Kafka's list values go in brackets."""
    items: list[str] = []
    depth, current = 0, ""
    for char in text:
        if char == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current += char
    items.append(current)
    out: dict[str, str] = {}
    for item in (i.strip() for i in items if i.strip()):
        key, value = admin_cli.config_pair(item)
        out[key.strip()] = value.strip().removeprefix("[").removesuffix("]")
    return out


def _entity(args: argparse.Namespace) -> tuple[str, str]:
    if args.topic is not None:
        return "topics", args.topic
    if args.broker is not None:
        return "brokers", args.broker
    if args.entity_type is None or args.entity_name is None:
        raise AdminError("name what to configure: --topic T, --broker N, or --entity-type and --entity-name")
    return args.entity_type, args.entity_name


def run_configs(args: argparse.Namespace) -> int:
    if args.entity_type == "users" and args.topic is None and args.broker is None:
        return users_cli.run_users(args)  # SCRAM credentials, in ZooKeeper
    kind, name = _entity(args)
    added = split_configs(args.add_config) if args.add_config else {}
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if args.alter and not (added or deleted):
        return admin_cli.usage_error("--alter needs --add-config or --delete-config")
    if args.bootstrap_server is None and kind != "topics":
        return admin_cli.usage_error(
            "broker configs need --bootstrap-server (they are read from the brokers)"
        )
    if args.alter:
        if args.bootstrap_server:
            kafka_flags.alter_configs(admin_cli.kafka_client(args), ENTITY_TYPES[kind], name, added, deleted)
        else:
            admin_cli.with_zookeeper(args, lambda zk: _alter_in_zookeeper(zk, name, added, deleted))
        print(f"Completed updating config for {kind[:-1]} {name}.")
        return 0
    if args.bootstrap_server:
        entries = kafka_flags.describe_configs(admin_cli.kafka_client(args), ENTITY_TYPES[kind], name)
        shown = [e for e in entries if args.all or e.source in DYNAMIC_SOURCES]
    else:
        overrides = admin_cli.with_zookeeper(args, lambda zk: entity_configs.read_topic_configs(zk, name))
        shown = [
            kafka_flags.ConfigValue(k, v, "DYNAMIC_TOPIC_CONFIG", False, False) for k, v in overrides.items()
        ]
    if args.json:
        admin_cli.print_json([e._asdict() for e in shown])
        return 0
    label = "All configs" if args.all else "Dynamic configs"
    admin_cli.print_table(
        ("NAME", "VALUE", "SOURCE", "READ-ONLY", "SENSITIVE"),
        [
            (e.name, "(sensitive)" if e.sensitive else e.value, e.source, e.read_only, e.sensitive)
            for e in shown
        ],
        title=f"{label} for {kind[:-1]} {name}:",
    )
    return 0


async def _alter_in_zookeeper(
    zk: AsyncZooKeeper, topic: str, added: dict[str, str], deleted: list[str]
) -> None:
    if not await zk.exists(znodes.topic_path(topic)):
        raise AdminError(f"Topic '{topic}' does not exist.")
    try:
        check_configs(dict(added))
    except AdminFailure as exc:
        raise AdminError(f"{exc.code.name}: {exc}") from None
    current = await entity_configs.read_topic_configs(zk, topic)
    missing = [k for k in deleted if k not in current]
    if missing:
        raise AdminError(f"Invalid config(s): {','.join(missing)}: not set on topic {topic}")
    merged = {k: v for k, v in {**current, **added}.items() if k not in deleted}
    await entity_configs.change_topic_configs(zk, topic, merged)
