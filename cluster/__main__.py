"""``python -m cluster``: run a local cluster (up/status/down/kill/bounce/restart) and administer any
cluster through ZooKeeper (topics, brokers, controller, elect-leaders, reassign, produce, consume)."""

from __future__ import annotations

import argparse
import sys

CLI_PACKAGES = ("rich", "confluent_kafka")
"""What the ``cli`` extra brings (pyproject.toml); the daemons need neither."""

try:
    from cluster import acls_cli, admin_cli, configs_cli, groups_cli, kafka_flags, lifecycle_cli, users_cli
except ModuleNotFoundError as missing:  # installed for the daemons only
    if missing.name not in CLI_PACKAGES:
        raise
    sys.exit(
        f"{missing}: the command-line tools need the cli extra: pip install 'kafka-zk-control-plane[cli]'"
    )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m cluster",
        description="Run a local cluster (up, watch, status, down, kill, bounce, restart) and administer "
        "any cluster through its ZooKeeper or its brokers' Admin API (topics, configs, brokers, controller, "
        "elect-leaders, reassign, consumer-groups, produce, consume).",
        epilog="Every command takes --dir DIR (default .run/cluster); admin commands also "
        "--zookeeper HOST:PORT.",
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    lifecycle_cli.register(commands)
    common = admin_cli.common_options()
    admin_cli.register(commands, common)
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
