"""``python -m cluster``: run a local cluster and administer any cluster, in Kafka's tools' spelling.

A local cluster (``lifecycle_cli``): up, watch, status, down, kill, bounce, restart, partition, heal,
verify-replicas. Any cluster, through its ZooKeeper or its brokers' Admin API: topics (``topics_cli``),
brokers and controller (``brokers_cli``), elect-leaders and reassign (``leadership_cli``), produce and
consume (``console_cli``), configs, consumer-groups, acls and users.
"""

from __future__ import annotations

import argparse
import sys

CLI_PACKAGES = ("rich", "confluent_kafka")
"""What the ``cli`` extra brings (pyproject.toml); the daemons need neither."""

try:
    from cluster import (
        acls_cli,
        admin_cli,
        brokers_cli,
        configs_cli,
        console_cli,
        groups_cli,
        kafka_flags,
        leadership_cli,
        lifecycle_cli,
        topics_cli,
        users_cli,
    )
except ModuleNotFoundError as missing:  # installed for the daemons only
    if missing.name not in CLI_PACKAGES:
        raise
    sys.exit(
        f"{missing}: the command-line tools need the cli extra: pip install 'kafka-zk-control-plane[cli]'"
    )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m cluster",
        description="Run a local cluster (up, watch, status, down, kill, bounce, restart, partition, "
        "heal, verify-replicas) and administer any cluster through its ZooKeeper or its brokers' Admin API "
        "(topics, configs, brokers, controller, elect-leaders, reassign, consumer-groups, acls, users, "
        "produce, consume).",
        epilog="Every command takes --dir DIR (default .run/cluster); admin commands also "
        "--zookeeper HOST:PORT.",
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    lifecycle_cli.register(commands)
    common = admin_cli.common_options()
    topics_cli.register(commands, common)
    brokers_cli.register(commands, common)
    leadership_cli.register(commands, common)
    console_cli.register(commands, common)
    configs_cli.register(commands, common)
    groups_cli.register(commands, common)
    acls_cli.register(commands, common)
    users_cli.register(commands, common)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(kafka_flags.translate(sys.argv[1:] if argv is None else argv))
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
