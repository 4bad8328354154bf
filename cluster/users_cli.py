"""``python -m cluster users``: SCRAM credentials in ZooKeeper, in kafka-configs.sh's spelling.

``kafka-configs.sh --zookeeper Z --entity-type users --entity-name alice --alter --add-config
'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'`` works as ``python -m cluster users
--zookeeper Z --entity-name alice --alter --add-config ...`` (and as ``python -m cluster configs
--entity-type users ...``). The password never leaves this process: only the salted keys are
written, to ``/config/users/<user>`` with a change notification, so running brokers reload them.
``--describe`` shows mechanisms and iteration counts, never salts or keys.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from cluster import admin_cli
from placement.errors import AdminError
from security.sasl import (
    DEFAULT_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    check_iterations,
    derive_credential,
)
from zkstore import users

__all__ = ["parse_delete_config", "parse_scram_config", "register", "run_users"]

_ITEM = re.compile(
    r"\s*(?P<key>[^=,\[\]\s]+)\s*=\s*(?:\[(?P<listed>[^\]]*)\]|(?P<bare>[^,\[\]]*?))\s*(?:,|\Z)"
)
"""One ``KEY=[a,b]`` or ``KEY=value`` item of --add-config, with the comma that ends it."""
_CREDENTIAL = re.compile(r"(?:iterations=(?P<iterations>[0-9]+),)?password=(?P<password>.*)", re.DOTALL)
"""Kafka's form of one SCRAM entry: an optional iteration count first, then the password (the rest)."""


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``users`` to ``python -m cluster``'s subcommands."""
    parser = commands.add_parser(
        "users",
        parents=[common],
        help="add, remove and describe users' SCRAM credentials in ZooKeeper (kafka-configs.sh's flags)",
    )
    parser.add_argument("--entity-name", metavar="USER", help="the user (all users with --describe)")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--describe", action="store_true")
    mode.add_argument("--alter", action="store_true")
    parser.add_argument(
        "--add-config",
        metavar="SCRAM-SHA-256=[iterations=N,password=P],...",
        help=f"credentials to set (iterations default {DEFAULT_ITERATIONS})",
    )
    parser.add_argument("--delete-config", metavar="SCRAM-SHA-512,...", help="credentials to remove")
    parser.set_defaults(run=admin_cli.guarded(run_users))


def _mechanism(name: str) -> str:
    if name not in SCRAM_MECHANISMS:
        raise AdminError(
            f"{name!r} is not a SCRAM mechanism this cluster supports ({', '.join(SCRAM_MECHANISMS)})"
        )
    return name


def parse_scram_config(text: str) -> dict[str, tuple[int, str]]:
    """``SCRAM-SHA-256=[iterations=8192,password=p],SCRAM-SHA-512=[password=p]`` -> mechanism ->
    (iterations, password); AdminError for any other key, a malformed entry or iterations outside
    [4096, 16384]."""
    entries: dict[str, tuple[int, str]] = {}
    pos = 0
    while pos < len(text):
        item = _ITEM.match(text, pos)
        if item is None or item.end() == pos:
            raise AdminError(f"--add-config: cannot read {text[pos:][:40]!r} (expected MECHANISM=[...])")
        pos = item.end()
        mechanism = _mechanism(item["key"])
        value = item["listed"] if item["listed"] is not None else item["bare"]
        found = _CREDENTIAL.fullmatch(value.strip())
        if found is None:
            raise AdminError(f"--add-config: {mechanism} needs [iterations=N,]password=P, not {value!r}")
        iterations = int(found["iterations"] or DEFAULT_ITERATIONS)
        try:
            check_iterations(mechanism, iterations)
        except ValueError as exc:
            raise AdminError(str(exc)) from None
        if mechanism in entries:
            raise AdminError(f"--add-config: {mechanism} is given twice")
        entries[mechanism] = (iterations, found["password"])
    return entries


def parse_delete_config(text: str) -> list[str]:
    """``SCRAM-SHA-512,SCRAM-SHA-256`` -> the mechanisms; AdminError for anything else."""
    return [_mechanism(name.strip()) for name in text.split(",") if name.strip()]


def run_users(args: argparse.Namespace) -> int:
    """Also what ``configs --entity-type users`` runs; reads only the flags both commands have."""
    if getattr(args, "bootstrap_server", None):
        return admin_cli.usage_error(
            "SCRAM credentials are written in ZooKeeper here (the brokers do not serve "
            "AlterUserScramCredentials): drop --bootstrap-server"
        )
    if args.alter:
        return _alter(args)
    found = admin_cli.with_zookeeper(
        args, lambda zk: users.describe_scram_users(zk, [args.entity_name] if args.entity_name else None)
    )
    if args.json:
        admin_cli.print_json(
            [
                {"user": user, "credentials": [{"mechanism": m, "iterations": i} for m, i in creds.items()]}
                for user, creds in found.items()
            ]
        )
        return 0
    rows = [(user, m, i) for user, creds in found.items() for m, i in creds.items()]
    if not rows:
        who = f"user {args.entity_name}" if args.entity_name else "any user"
        print(f"No SCRAM credentials for {who}.")
        return 0
    admin_cli.print_table(("USER", "MECHANISM", "ITERATIONS"), rows)
    return 0


def _alter(args: argparse.Namespace) -> int:
    if not args.entity_name:
        return admin_cli.usage_error("--alter needs --entity-name USER")
    if not (args.add_config or args.delete_config):
        return admin_cli.usage_error("--alter needs --add-config or --delete-config")
    added = parse_scram_config(args.add_config or "")
    deleted = parse_delete_config(args.delete_config or "")
    credentials: dict[str, ScramCredential] = {
        mechanism: derive_credential(mechanism, password, iterations)
        for mechanism, (iterations, password) in added.items()
    }
    admin_cli.with_zookeeper(
        args, lambda zk: users.alter_scram_credentials(zk, args.entity_name, credentials, deleted)
    )
    print(f"Completed updating config for user {args.entity_name}.")
    return 0
