"""Brokers that acknowledge every control request as fast as possible, to time the controller alone.

The tests' ``tests.support.broker_sim`` decodes and validates each request like a real broker; at
200 brokers and 200k partitions that decoding would be the bottleneck the benchmark measures. An ack
broker (its connection: ``bench.ack_protocol``) reads every byte of a request but decodes only its
header, then answers with a precomputed NONE body (``error_response_body``) framed for the request's
correlation id. It counts requests and bytes per API and records when it answered the latest request of
each API, in ``time.monotonic()`` seconds: the default asyncio loop's clock, shared by every process of
the machine.

Each broker has one listener, advertised as both ``CONTROLLER`` and ``PLAINTEXT``, and is registered
in ZooKeeper (KIP-380 epochs) over one session per process unless ``--no-register`` is given, with the
version 5 JSON this project's brokers write, which Apache Kafka 3.9's controller also reads: a Kafka
controller dials its control-plane listener (``control.plane.listener.name``) or else its inter-broker
listener, and both names are here. ``--ibp`` says which wire control requests are read and answered
in (``protocol.ibp.control_wire``): the default, the seeds' layouts; ``3.9``, Apache Kafka 3.9's
(LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4, flexible, answered in Kafka's response layouts),
so that either controller can drive the same brokers.

For LeaderAndIsr, UpdateMetadata and StopReplica the controller epoch is read too (a fixed-width field
near the body's start): per epoch and API each broker counts its answers and when, in wall-clock
seconds (``time.time()``), it sent the last one, so a benchmark can tell when the controller elected
with that epoch was last acknowledged, whichever implementation it is. SIGUSR1 prints them as one
``{"progress": {id: {epoch: {api: [answers, last_at]}}}}`` line. With
``--ssl-keystore`` and ``--ssl-truststore`` the listener serves TLS, requires a client certificate the
truststore trusts (``ssl.client.auth=required``), and is registered with security protocol SSL, so a
controller dials it over TLS; every broker of the run presents the same keystore.

    .venv/bin/python -m bench.ack_brokers --zookeeper CONNECT --brokers N [--first-id 1]
        [--processes P] [--no-register] [--host 127.0.0.1] [--ibp 2.3-IV2|3.9]
        [--ssl-keystore PEM --ssl-truststore PEM]

prints ``{"brokers": {id: {"epoch", "port", "control_port"}}}`` once every broker listens (and is
registered), runs until SIGTERM or SIGINT, then prints ``{"stats": {id: {...}}}`` and exits 0. With
``--processes P`` the brokers are spread over P child processes and the lines are merged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import ssl
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

import uvloop

from bench.ack_protocol import AckProtocol, Stats
from daemon.runtime import die_with_parent
from protocol import WireDialect
from protocol.ibp import DEFAULT_IBP, control_wire
from security.tls import TlsSettings, server_context
from zkstore.aio import AsyncZooKeeper
from zkstore.registration import register_broker
from zkstore.znodes import BrokerRegistration, Endpoint

__all__ = ["AckBrokers", "BrokerInfo", "merge_progress", "merge_stats"]

LISTENERS = ("CONTROLLER", "PLAINTEXT")

DEFAULT_DIALECT = control_wire(DEFAULT_IBP).dialect
"""The wire of a controller at the default IBP: the seeds' layouts."""


class AckBroker:
    """One broker id: a listener, and optionally its registration (the epoch is its znode's czxid)."""

    def __init__(
        self,
        broker_id: int,
        host: str,
        tls: ssl.SSLContext | None = None,
        dialect: WireDialect = DEFAULT_DIALECT,
    ) -> None:
        self.broker_id = broker_id
        self.host = host
        self.tls = tls
        self.dialect = dialect
        self.stats = Stats()
        self.epoch = -1
        self.port = 0
        self._server: asyncio.Server | None = None

    async def listen(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: AckProtocol(self.stats, self.dialect), self.host, 0, backlog=512, ssl=self.tls
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def registration(self) -> BrokerRegistration:
        return BrokerRegistration(
            broker_id=self.broker_id,
            endpoints=tuple(Endpoint(name, self.host, self.port) for name in LISTENERS),
            listener_security_protocol_map=dict.fromkeys(
                LISTENERS, "PLAINTEXT" if self.tls is None else "SSL"
            ),
            timestamp=int(time.time() * 1000),
        )

    async def register(self, zk: AsyncZooKeeper) -> None:
        self.epoch = await register_broker(zk, self.broker_id, self.registration().encode())

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def describe(self) -> dict[str, int]:
        return {"epoch": self.epoch, "port": self.port, "control_port": self.port}


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The listeners' TLS context (client certificates required), or None for PLAINTEXT."""
    if args.ssl_keystore is None:
        return None
    settings = TlsSettings(
        keystore_location=args.ssl_keystore, truststore_location=args.ssl_truststore, client_auth="required"
    )
    return server_context(settings)


async def _serve(args: argparse.Namespace) -> None:
    tls = _tls(args)
    dialect = control_wire(args.ibp).dialect
    brokers = [
        AckBroker(i, args.host, tls, dialect) for i in range(args.first_id, args.first_id + args.brokers)
    ]
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)

    def report_progress() -> None:
        progress = {b.broker_id: b.stats.progress_json() for b in brokers}
        print(json.dumps({"progress": progress}), flush=True)

    loop.add_signal_handler(signal.SIGUSR1, report_progress)
    await asyncio.gather(*(b.listen() for b in brokers))
    zk = None
    if not args.no_register:
        zk = AsyncZooKeeper(args.zookeeper, session_timeout_ms=args.session_timeout_ms)
        await zk.start()
        await asyncio.gather(*(b.register(zk) for b in brokers))
    try:
        print(json.dumps({"brokers": {b.broker_id: b.describe() for b in brokers}}), flush=True)
        await stopping.wait()
    finally:
        await asyncio.gather(*(b.close() for b in brokers))
        if zk is not None:
            await zk.close()
    print(json.dumps({"stats": {b.broker_id: b.stats.as_json() for b in brokers}}), flush=True)


# -- several processes


def _split(brokers: int, first_id: int, processes: int) -> list[tuple[int, int]]:
    """(first id, count) per process, as even as possible."""
    base, extra = divmod(brokers, processes)
    parts, next_id = [], first_id
    for i in range(processes):
        count = base + (1 if i < extra else 0)
        if count:
            parts.append((next_id, count))
            next_id += count
    return parts


def _child_command(args: argparse.Namespace, first_id: int, count: int) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "bench.ack_brokers",
        "--brokers",
        str(count),
        "--first-id",
        str(first_id),
    ]
    command += ["--host", args.host, "--log-level", args.log_level, "--ibp", args.ibp]
    command += ["--session-timeout-ms", str(args.session_timeout_ms)]
    if args.zookeeper:
        command += ["--zookeeper", args.zookeeper]
    if args.no_register:
        command.append("--no-register")
    if args.ssl_keystore is not None:
        command += ["--ssl-keystore", args.ssl_keystore, "--ssl-truststore", args.ssl_truststore]
    return command


def _read_json_line(stream: IO[str], key: str) -> dict[str, Any]:
    for line in stream:
        line = line.strip()
        if line.startswith("{") and key in line:
            value: dict[str, Any] = json.loads(line)[key]
            return value
    raise RuntimeError(f"an ack-broker process ended without its {key!r} line")


def _supervise(args: argparse.Namespace) -> int:
    """Run one child per share of the brokers; merge their ready lines, then their stats lines."""
    stop = progress_asked = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    def on_progress(signum: int, frame: object) -> None:
        nonlocal progress_asked
        progress_asked = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGUSR1, on_progress)
    children = [
        subprocess.Popen(
            _child_command(args, first, count), stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent
        )
        for first, count in _split(args.brokers, args.first_id, args.processes)
    ]
    try:
        ready: dict[str, Any] = {}
        for child in children:
            assert child.stdout is not None
            ready.update(_read_json_line(child.stdout, "brokers"))
        print(json.dumps({"brokers": ready}), flush=True)
        while not stop and all(child.poll() is None for child in children):
            if progress_asked:
                progress_asked = False
                print(json.dumps({"progress": _children_progress(children)}), flush=True)
            time.sleep(0.02)
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
    stats: dict[str, Any] = {}
    for child in children:
        assert child.stdout is not None
        with contextlib.suppress(RuntimeError):
            stats.update(_read_json_line(child.stdout, "stats"))
        child.wait()
    print(json.dumps({"stats": stats}), flush=True)
    return 0 if all(child.returncode == 0 for child in children) else 1


def _children_progress(children: list[subprocess.Popen[str]]) -> dict[str, Any]:
    """Ask every child for its progress line and merge them (broker ids do not overlap)."""
    for child in children:
        child.send_signal(signal.SIGUSR1)
    progress: dict[str, Any] = {}
    for child in children:
        assert child.stdout is not None
        progress.update(_read_json_line(child.stdout, "progress"))
    return progress


# -- for benchmarks


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    epoch: int
    port: int


def merge_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """Totals over brokers per API: requests, bytes, and the latest ``last_response_at``; and the
    connections accepted, and of them over TLS."""
    requests: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    last: dict[str, float] = {}
    for broker in stats.values():
        requests.update(broker["requests"])
        sizes.update(broker["bytes"])
        for api, at in broker["last_response_at"].items():
            last[api] = max(at, last.get(api, at))
    return {
        "requests": dict(requests),
        "bytes": dict(sizes),
        "last_response_at": last,
        "connections": sum(broker.get("connections", 0) for broker in stats.values()),
        "tls_connections": sum(broker.get("tls_connections", 0) for broker in stats.values()),
    }


def merge_progress(progress: dict[str, Any], epoch: int) -> dict[int, dict[str, list[float]]]:
    """One controller epoch of a ``progress`` line: per broker id, per API, ``[answers, last_at]``."""
    return {int(broker): apis.get(str(epoch), {}) for broker, apis in progress.items()}


class AckBrokers:
    """The command line as a child process of a benchmark: ``start`` waits for it, ``stop`` reads stats,
    ``progress`` asks for the answers per controller epoch so far."""

    def __init__(
        self,
        brokers: int,
        *,
        zookeeper: str | None = None,
        first_id: int = 1,
        processes: int = 1,
        host: str = "127.0.0.1",
        tls: tuple[os.PathLike[str] | str, os.PathLike[str] | str] | None = None,
        ibp: str = DEFAULT_IBP,
    ) -> None:
        """``tls``: (keystore, truststore) PEM files to serve mutual TLS with; None serves PLAINTEXT.
        ``ibp``: the inter-broker protocol whose control-plane wire the brokers read and answer."""
        self.command = [sys.executable, "-m", "bench.ack_brokers", "--brokers", str(brokers)]
        self.command += ["--first-id", str(first_id), "--processes", str(processes), "--host", host]
        self.command += ["--ibp", ibp]
        self.command += ["--zookeeper", zookeeper] if zookeeper else ["--no-register"]
        if tls is not None:
            keystore, truststore = tls
            self.command += ["--ssl-keystore", os.fspath(keystore), "--ssl-truststore", os.fspath(truststore)]
        self.process: subprocess.Popen[str] | None = None
        self.brokers: dict[int, BrokerInfo] = {}

    def start(self) -> dict[int, BrokerInfo]:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.process = subprocess.Popen(
            self.command, stdout=subprocess.PIPE, text=True, cwd=root, preexec_fn=die_with_parent
        )
        assert self.process.stdout is not None
        ready = _read_json_line(self.process.stdout, "brokers")
        self.brokers = {int(b): BrokerInfo(v["epoch"], v["port"]) for b, v in ready.items()}
        return self.brokers

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def progress(self) -> dict[str, Any]:
        """Every broker's answers per controller epoch so far: ``{id: {epoch: {api: [n, last_at]}}}``
        with string keys, as printed (``merge_progress`` picks one epoch). Blocks for one round trip."""
        process = self.process
        assert process is not None and process.stdout is not None
        process.send_signal(signal.SIGUSR1)
        return _read_json_line(process.stdout, "progress")

    def stop(self) -> dict[str, Any]:
        """SIGTERM, then the per-broker stats it prints (empty if it had died)."""
        process = self.process
        if process is None:
            return {}
        self.process = None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        assert process.stdout is not None
        try:
            stats = _read_json_line(process.stdout, "stats")
        except RuntimeError:
            stats = {}
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return stats

    def __enter__(self) -> AckBrokers:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- command line


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.ack_brokers", description=__doc__.split("\n")[0])
    parser.add_argument("--zookeeper", help="ZooKeeper connect string (a chroot allowed)")
    parser.add_argument("--brokers", type=int, required=True, help="how many brokers")
    parser.add_argument("--first-id", type=int, default=1, help="the first broker id (default 1)")
    parser.add_argument(
        "--processes", type=int, default=1, help="spread the brokers over this many processes"
    )
    parser.add_argument("--no-register", action="store_true", help="listen only; no ZooKeeper registration")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on and advertise")
    parser.add_argument("--session-timeout-ms", type=int, default=30_000)
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument(
        "--ibp",
        default=DEFAULT_IBP,
        help="inter.broker.protocol.version whose control-plane wire to read and answer (3.9: Kafka 3.9's)",
    )
    parser.add_argument("--ssl-keystore", help="serve TLS with this PEM keystore (key, then chain)")
    parser.add_argument("--ssl-truststore", help="PEM CA certificates that client certificates must chain to")
    args = parser.parse_args(argv)
    if (args.ssl_keystore is None) != (args.ssl_truststore is None):
        parser.error("--ssl-keystore and --ssl-truststore go together (clients must present certificates)")
    if not args.no_register and not args.zookeeper:
        parser.error("--zookeeper is required unless --no-register is given")
    if args.brokers < 1 or args.processes < 1:
        parser.error("--brokers and --processes must be positive")
    try:
        control_wire(args.ibp)
    except ValueError as exc:
        parser.error(f"--ibp {args.ibp}: {exc}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    if args.processes > 1:
        return _supervise(args)
    uvloop.run(_serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
