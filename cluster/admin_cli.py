"""Shared plumbing of the admin commands: common options, where the cluster is, errors, tables and JSON.

The commands themselves are ``topics_cli``, ``brokers_cli``, ``leadership_cli`` (elect-leaders,
reassign), ``console_cli`` (produce, consume), ``configs_cli``, ``groups_cli``, ``acls_cli`` and
``users_cli``; each registers its subcommands with the options of :func:`common_options` and wraps
them in :func:`guarded`. Output is tables for people (rich at a terminal, aligned plain text when
piped) and ``--json`` for scripts. An error is one ``error: ...`` line on stderr and exit code 1;
argparse gives 2 for usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from kazoo.exceptions import KazooException

from cluster import kafka_flags, state_file
from daemon.config import ConfigError, parse_properties
from placement.errors import AdminError
from zkstore import admin_session, cluster_reads
from zkstore.aio import AsyncZooKeeper
from zkstore.client_config import load_zk_security

__all__ = [
    "bootstrap_servers",
    "common_options",
    "config_pair",
    "fail",
    "format_table",
    "guarded",
    "kafka_client",
    "print_json",
    "print_table",
    "usage_error",
    "with_zookeeper",
]

DEFAULT_ZOOKEEPER = "127.0.0.1:2181"
ZOOKEEPER_ENV = "KAFKA_ZOOKEEPER_CONNECT"
CLIENT_LISTENER = "PLAINTEXT"

_T = TypeVar("_T")
Run = Callable[[argparse.Namespace], int]


# ----------------------------------------------------------------------------------------------------
# Options and errors


def common_options() -> argparse.ArgumentParser:
    """--zookeeper, --zk-config, --dir and --json, which every admin command takes."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        help=f"ZooKeeper connect string (default: --dir's, else ${ZOOKEEPER_ENV}, else the cluster in "
        f"{state_file.DEFAULT_DIR} if one was started there, else {DEFAULT_ZOOKEEPER})",
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


def guarded(run: Run) -> Run:
    """Turn every foreseeable failure into one ``error:`` line and exit code 1."""

    @functools.wraps(run)
    def run_guarded(args: argparse.Namespace) -> int:
        _quiet_logging()
        try:
            return run(args)
        except (AdminError, ConfigError, state_file.ClusterError, kafka_flags.AdminApiError) as exc:
            return fail(str(exc))
        except KazooException as exc:
            return fail(f"ZooKeeper: {type(exc).__name__} {exc}".rstrip())
        except OSError as exc:
            return fail(str(exc))
        except KeyboardInterrupt:
            return 130  # the shell's code for SIGINT; the user knows why

    return run_guarded


def _quiet_logging() -> None:
    """Outside a host that configured logging, show warnings (a corrupt znode) but not kazoo's retries."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="warning: %(name)s: %(message)s")
        logging.getLogger("kazoo").setLevel(logging.ERROR)


def fail(message: str) -> int:
    """One ``error:`` line on stderr: exit code 1, a command that could not be done."""
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
    return state_file.DEFAULT_DIR if state_file.state_path(state_file.DEFAULT_DIR).exists() else None


def _zookeeper(args: argparse.Namespace) -> str:
    """--zookeeper, else the local cluster's (see _local_cluster), else $KAFKA_ZOOKEEPER_CONNECT, else
    Kafka's usual local address."""
    if args.zookeeper:
        return args.zookeeper
    directory = _local_cluster(args)
    if directory is not None:
        connect = state_file.load_state(directory).get("zookeeper_connect")
        if not isinstance(connect, str) or not connect:
            raise AdminError(f"{state_file.state_path(directory)} has no zookeeper_connect")
        return connect
    return os.environ.get(ZOOKEEPER_ENV) or DEFAULT_ZOOKEEPER


def _zk_config(args: argparse.Namespace) -> Path | None:
    """--zk-config, else that of the local cluster whose ZooKeeper is used (a secure one has one)."""
    given: Path | None = getattr(args, "zk_config", None)
    if given is not None or args.zookeeper:
        return given
    directory = _local_cluster(args)
    return state_file.zk_config(state_file.load_state(directory)) if directory is not None else None


def with_zookeeper(args: argparse.Namespace, work: Callable[[AsyncZooKeeper], Awaitable[_T]]) -> _T:
    zk_config = _zk_config(args)
    security = load_zk_security(zk_config) if zk_config is not None else None

    async def session() -> _T:
        async with admin_session.connect(_zookeeper(args), security=security) as zk:
            return await work(zk)

    return asyncio.run(session())


def kafka_client(args: argparse.Namespace, servers: str | None = None) -> dict[str, str]:
    """librdkafka settings reaching the brokers: ``bootstrap.servers`` (--bootstrap-server, else
    ``servers``) and the security settings of --command-config, else of the local secure cluster."""
    settings: dict[str, str] = {}
    path: Path | None = getattr(args, "command_config", None)
    if path is None and not args.zookeeper:
        directory = _local_cluster(args)
        path = state_file.client_config(state_file.load_state(directory)) if directory is not None else None
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
        state = state_file.load_state(directory)
        listeners = [
            ln for p in state["processes"] if p["role"] == "broker" for ln in p.get("listeners") or []
        ]
        listener = state_file.client_listener(state)
        where = str(state_file.state_path(directory))
    else:
        brokers = with_zookeeper(args, cluster_reads.broker_list)
        listeners = [ep for b in brokers for ep in b.endpoints]
        where = f"/brokers/ids at {_zookeeper(args)}"
    servers = state_file.client_endpoints(listeners, listener)
    if not servers:
        raise AdminError(f"no broker with a {listener} listener in {where}; give --bootstrap-server")
    return ",".join(servers)


# ----------------------------------------------------------------------------------------------------
# Output and arguments


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


def config_pair(text: str) -> tuple[str, str]:
    """``--config KEY=VALUE`` as ``(key, value)``."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise AdminError(f"--config {text!r} is not KEY=VALUE")
    return key, value
