"""The commands of a local cluster to experiment on: start and watch it, stop nodes, cut links, check disks.

``python -m cluster up|watch|status|down|kill|bounce|restart``, ``partition`` and ``heal`` (a ``--netns``
cluster's cuts), and ``verify-replicas`` (the replicas compared on disk).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cluster import launcher, node_control, partitions, state_file
from zkserver.ports import LOOPBACK


def register(commands: Any) -> None:
    """Add the local cluster's commands to ``python -m cluster``'s subparsers."""
    _register_up(commands)
    _register_cuts_and_checks(commands)
    _register_node_commands(commands)


def _register_up(commands: Any) -> None:
    """``up`` and its layout options."""
    up = commands.add_parser("up", help="start a local cluster (and watch it, unless --detach)")
    add_dir_option(up)
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--controllers", type=int, default=2, help="controller candidates (one is active)")
    up.add_argument("--zookeeper-nodes", type=int, choices=(1, 3), default=1)
    up.add_argument(
        "--kafka-brokers",
        type=int,
        default=0,
        help="Apache Kafka 3.9 brokers beside ours (make kafka first); every daemon then runs at IBP 3.9",
    )
    up.add_argument(
        "--shared-listener", action="store_true", help="no control-plane listener: Kafka before KIP-291"
    )
    up.add_argument("--detach", action="store_true", help="start, print where everything is, and return")
    up.add_argument("--demo-topic", default="demo", help="topic created once the cluster is up ('' for none)")
    up.add_argument(
        "--kafka-ports",
        action="store_true",
        help="ZooKeeper on 2181 and brokers on 9092, 9093, ... where free (make run does this)",
    )
    up.add_argument(
        "--netns",
        action="store_true",
        help="every node in a network namespace of its own, on its own address (root only), so that "
        "`partition` can cut links between nodes",
    )
    up.add_argument(
        "--secure",
        action="store_true",
        help="TLS everywhere: a throwaway CA, mutual TLS between nodes, SASL_SSL/SCRAM for clients, ACLs, "
        "ZooKeeper over TLS with ACLs; prints the client config file to use",
    )
    up.add_argument(
        "--monitor",
        action="store_true",
        help="also start a local Prometheus (Debian's prometheus package) scraping every daemon, with the "
        "alert rules of deploy/prometheus/rules",
    )
    up.set_defaults(run=_reporting(run_up))


def _register_cuts_and_checks(commands: Any) -> None:
    """``partition`` and ``heal`` (--netns clusters), and ``verify-replicas``."""
    cut = commands.add_parser(
        "partition", help="cut NODE... off from the other nodes (or from --from NODE...) (--netns clusters)"
    )
    add_dir_option(cut)
    cut.add_argument("nodes", nargs="+", metavar="NODE")
    cut.add_argument(
        "--from", dest="others", nargs="+", default=[], metavar="NODE", help="default: all others"
    )
    cut.add_argument("--one-way", action="store_true", help="drop only what the other side sends to NODE...")
    cut.set_defaults(run=_reporting(run_partition))

    heal = commands.add_parser("heal", help="remove every cut, or those involving NODE...")
    add_dir_option(heal)
    heal.add_argument("nodes", nargs="*", metavar="NODE")
    heal.set_defaults(run=_reporting(run_heal))

    verify = commands.add_parser(
        "verify-replicas",
        help="do all replicas hold the same record batches up to the high watermark? (read from the "
        "local cluster's disks; exit 1 if not)",
    )
    add_dir_option(verify)
    verify.add_argument("--topic", action="append", default=[], help="only this topic (repeatable)")
    verify.add_argument("--json", action="store_true")
    verify.add_argument(
        "--no-record",
        action="store_true",
        help="write no replicas_verified line to DIR/verify-replicas/events.jsonl (for the audit)",
    )
    verify.set_defaults(run=_reporting(run_verify_replicas))


def _register_node_commands(commands: Any) -> None:
    """``status``, ``watch``, ``down``, and ``kill``, ``bounce``, ``restart`` of one node."""
    status = commands.add_parser("status", help="the processes of a local cluster")
    add_dir_option(status)
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=_reporting(run_status))

    watch = commands.add_parser(
        "watch", help="the live view of a running local cluster (Ctrl-C leaves it running)"
    )
    add_dir_option(watch)
    watch.add_argument("--once", action="store_true", help="print the view once and exit")
    watch.set_defaults(run=_reporting(run_watch))

    down = commands.add_parser("down", help="stop a local cluster in order (brokers, controllers, ZooKeeper)")
    add_dir_option(down)
    down.set_defaults(run=_reporting(run_down))

    for action, text in (
        ("kill", "SIGKILL a node"),
        ("bounce", "SIGKILL a node and start it again at once (a broker's fast bounce, KIP-380)"),
        ("restart", "stop a node cleanly and start it again"),
    ):
        parser = commands.add_parser(action, help=text)
        add_dir_option(parser)
        parser.add_argument("node", help="broker-N, controller-N or zookeeper-N")
        parser.set_defaults(run=_reporting(run_node_action), action=action)


def add_dir_option(parser: argparse.ArgumentParser) -> None:
    """``--dir``: the local cluster's directory, ``make run``'s by default."""
    parser.add_argument(
        "--dir",
        type=Path,
        default=state_file.DEFAULT_DIR,
        help=f"the cluster's directory ({state_file.DEFAULT_DIR})",
    )


def fail(message: str) -> int:
    """One ``error:`` line on stderr; the exit status of a command that could not be done."""
    print(f"error: {message}", file=sys.stderr)
    return 1


def _reporting(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command whose ClusterError (no cluster there, unknown node, …) becomes one error line, exit 1."""

    @functools.wraps(run)
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except state_file.ClusterError as exc:
            return fail(str(exc))

    return wrapped


def run_up(args: argparse.Namespace) -> int:
    console = Console()
    layout = launcher.Layout(
        args.brokers,
        args.controllers,
        args.zookeeper_nodes,
        args.shared_listener,
        args.netns,
        args.kafka_ports,
        args.secure,
        args.monitor,
        args.kafka_brokers,
    )
    layout.check()
    with console.status(f"starting {layout.brokers} brokers and {layout.controllers} controllers"):
        state = asyncio.run(launcher.up(args.dir, layout))
        if args.demo_topic:
            asyncio.run(launcher.create_demo_topic(state, args.demo_topic))
    for notice in state.get("notices", []):
        console.print(f"[yellow]{notice}[/]")
    console.print(f"bootstrap: {state_file.bootstrap_servers(state)}", soft_wrap=True)
    prometheus = next((p for p in state["processes"] if p["role"] == "prometheus"), None)
    if prometheus is not None:
        console.print(
            f"Prometheus: {prometheus['url']} (alerts: {prometheus['url']}/alerts)", highlight=False
        )
    client_config = state_file.client_config(state)
    if client_config is not None:
        console.print(how_to_connect(state, client_config), soft_wrap=True, highlight=False)
    console.print(processes_table(state))
    console.print(
        f"ZooKeeper: {state['zookeeper_connect']}    state: {state_file.state_path(args.dir.resolve())}"
    )
    if args.detach:
        console.print(f"stop it with: python -m cluster down --dir {args.dir}")
        return 0
    from cluster.live_view import watch

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM or a closed terminal: the same ordered shutdown as Ctrl-C

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    stop = asyncio.Event()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(watch(state, console, stop))
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the shutdown below must not be cut short
        signal.signal(sig, signal.SIG_IGN)
    # The terminal may be gone (SIGHUP): nothing printed may stand in the way of stopping everything.
    with contextlib.suppress(OSError):
        console.print("stopping: brokers (controlled shutdown), then controllers, then ZooKeeper")
    stopped = node_control.down(args.dir)
    with contextlib.suppress(OSError):
        console.print(f"stopped {', '.join(stopped)}")
        console.print(f"logs and event logs are under {state['directory']}")
    return 0


def how_to_connect(state: dict[str, Any], client_config: Path) -> str:
    """What a user of a secure cluster needs: the client config file and a command that uses it."""
    servers = state_file.bootstrap_servers(state)
    return "\n".join(
        (
            f"client config (SASL_SSL, SCRAM-SHA-512, user admin, a super user): {client_config}",
            f"  kcat -F {client_config} -b {servers} -L",
            f"the admin commands find both with --dir (python -m cluster produce --dir {state['directory']} "
            "--topic demo --count 10); other tools: --command-config (brokers) and --zk-config "
            f"{state_file.zk_config(state)} (ZooKeeper, TLS and ACLs)",
        )
    )


def run_status(args: argparse.Namespace) -> int:
    state = state_file.load_state(args.dir)
    rows = [{**p, "alive": state_file.alive(p.get("pid"))} for p in state["processes"]]
    cuts = [{"from": s, "to": t} for s, t in partitions.active(args.dir)]
    if args.json:
        print(json.dumps({**state, "processes": rows, "partitions": cuts}, indent=2))
    else:
        console = Console()
        console.print(processes_table({**state, "processes": rows}))
        if state_file.network_of(state) is not None:
            console.print(f"partitions: {_cuts_text(partitions.active(args.dir))}")
    return 0


def _cuts_text(cuts: list[tuple[str, str]]) -> str:
    return ", ".join(f"{s} -/-> {t}" for s, t in cuts) or "none"


def run_verify_replicas(args: argparse.Namespace) -> int:
    from cluster.verify_replicas import record, run
    from daemon.eventlog import EventLog
    from placement.errors import AdminError

    try:
        reports = run(state_file.load_state(args.dir), args.topic)
    except AdminError as exc:
        return fail(str(exc))
    if not args.no_record:
        events = EventLog(args.dir / "verify-replicas" / "events.jsonl", node="verify-replicas")
        try:
            record(events, reports, topics=args.topic)
        finally:
            events.close()
    diverged = [r for r in reports if not r.consistent]
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in reports], indent=2))
    else:
        for report in diverged:
            for d in report.divergences:
                print(
                    f"{d.topic}-{d.partition}: replica {d.replica} differs at offset {d.offset}: {d.detail}"
                )
        print(
            f"{len(reports)} partitions checked up to their high watermarks: "
            f"{len(reports) - len(diverged)} consistent, {len(diverged)} diverged"
        )
    return 1 if diverged else 0


def run_partition(args: argparse.Namespace) -> int:
    cuts = partitions.partition(args.dir, args.nodes, args.others, one_way=args.one_way)
    print(f"cut; in force: {_cuts_text(cuts)}")
    return 0


def run_heal(args: argparse.Namespace) -> int:
    left = partitions.heal(args.dir, args.nodes)
    print(f"healed; still cut: {_cuts_text(left)}")
    return 0


def run_watch(args: argparse.Namespace) -> int:
    from cluster.live_view import snapshot, watch

    state = state_file.load_state(args.dir)
    if not any(state_file.alive(p.get("pid")) for p in state["processes"] if p["role"] == "zookeeper"):
        return fail(f"the cluster in {args.dir} is not running (its ZooKeeper is down)")
    console = Console()
    if args.once:
        asyncio.run(snapshot(state, console))
        return 0
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            watch(state, console, asyncio.Event(), footer="Ctrl-C stops watching; the cluster keeps running")
        )
    return 0


def run_down(args: argparse.Namespace) -> int:
    stopped = node_control.down(args.dir)
    print(f"stopped {', '.join(stopped) or 'nothing (no process was running)'}")
    return 0


def run_node_action(args: argparse.Namespace) -> int:
    entry = node_control.node_action(args.dir, args.node, args.action)
    verb = {"kill": "killed", "bounce": "bounced", "restart": "restarted"}[args.action]
    print(f"{verb} {entry['name']}" + (f" (pid {entry['pid']})" if args.action != "kill" else ""))
    return 0


def processes_table(state: dict[str, Any]) -> Table:
    table = Table(title=f"cluster in {state['directory']}")
    for column in ("node", "pid", "alive", "address", "listeners", "metrics", "log"):
        table.add_column(column)
    for p in state["processes"]:
        running = p.get("alive", state_file.alive(p.get("pid")))
        port = f"client port {p['port']}" if p.get("port") else "-"
        listeners = ", ".join(p.get("listeners", [])) or p.get("url") or port
        table.add_row(
            p["name"],
            str(p.get("pid") or "-"),
            "[green]yes[/]" if running else "[red]no[/]",
            p.get("address", LOOPBACK),
            listeners,
            str(p.get("metrics_port") or "-"),
            p.get("log", ""),
        )
    return table
