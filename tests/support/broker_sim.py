"""Simulated brokers: real ZooKeeper registrations and real TCP listeners, no data plane.

The controller's integration tests need many brokers that register like Kafka's
(KIP-380: the czxid of ``/brokers/ids/N`` is the broker epoch) and answer LeaderAndIsr, UpdateMetadata
and StopReplica with a real broker's validation (reference §4.1): a stale broker epoch gets
STALE_BROKER_EPOCH (77), a controller epoch below the highest seen gets STALE_CONTROLLER_EPOCH (11),
and a rejected request changes nothing. Hundreds of them run in one process, by default over one
shared ZooKeeper session.

Each broker records what it received (for tests to wait on) unless ``record=False``, which keeps only
counters: a run of 200 brokers x 200k partitions cannot hold every body (``bench.ack_brokers``, which
only acknowledges, is what the benchmarks use at that scale).

    .venv/bin/python -m tests.support.broker_sim --zookeeper 127.0.0.1:2181 --brokers 3 [--first-id 1]
        [--no-control-plane] [--no-validate] [--host 127.0.0.1]

prints ``{"brokers": {id: {"epoch", "control_port", "port"}}}`` on one line once every broker is
registered, runs until SIGTERM or SIGINT, then prints ``{"stats": ...}`` and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvloop
from kazoo.exceptions import NoNodeError

from cluster.secure import SecureCluster
from network.server import RequestServer, current_request
from protocol import (
    CONTROL_APIS,
    LEADER_DURING_DELETE,
    UNKNOWN_BROKER_EPOCH,
    ApiKey,
    ErrorCode,
    RequestHeader,
    epoch_field,
)
from protocol.control_requests import broker_epoch_is_stale
from zkstore.aio import AsyncZooKeeper
from zkstore.registration import register_broker
from zkstore.znodes import BrokerRegistration, Endpoint, TopicPartition, broker_path

__all__ = [
    "CONTROL_LISTENER",
    "DATA_LISTENER",
    "BrokerStats",
    "Received",
    "SimulatedBroker",
    "SimulatedCluster",
]

log = logging.getLogger("tests.support.broker_sim")

CONTROL_LISTENER = "CONTROLLER"
"""The KIP-291 control-plane listener (``control.plane.listener.name``)."""
DATA_LISTENER = "PLAINTEXT"


@dataclass(slots=True)
class Received:
    """One control request as the broker saw it, with the error it answered."""

    api_key: int
    api_version: int
    correlation_id: int
    body: dict[str, Any]
    error: int
    at: float
    """Loop time at which the request had been read."""
    raw_size: int
    """Bytes of the request frame, size prefix included."""
    listener: str

    def describe(self) -> str:
        return (
            f"{ApiKey(self.api_key).name} v{self.api_version} #{self.correlation_id} "
            f"via {self.listener} -> {ErrorCode.name_of(self.error)}"
        )


@dataclass(slots=True)
class BrokerStats:
    """Counters kept even when bodies are not recorded; keyed by API key."""

    requests: Counter[int] = field(default_factory=Counter)
    bytes: Counter[int] = field(default_factory=Counter)
    rejected: Counter[int] = field(default_factory=Counter)
    last_response_at: dict[int, float] = field(default_factory=dict)
    """Loop time at which the latest response to each API was produced."""

    def as_json(self) -> dict[str, Any]:
        def named(values: dict[int, Any]) -> dict[str, Any]:
            return {ApiKey(key).name: value for key, value in sorted(values.items())}

        return {
            "requests": named(self.requests),
            "bytes": named(self.bytes),
            "rejected": named(self.rejected),
            "last_response_at": named(self.last_response_at),
        }


class SimulatedBroker:
    """One broker: listeners served by RequestServer, a registration in ZooKeeper, what it learnt.

    With ``zk`` given, the broker registers over that (shared) session and never closes it; otherwise it
    opens its own. ``control_plane=False`` leaves out the CONTROLLER listener, so a controller must use
    PLAINTEXT. Both listeners serve the control APIs, as a ZooKeeper-mode Kafka broker does; ``Received``
    says which listener a request came through.
    """

    def __init__(
        self,
        broker_id: int,
        zk_connect: str,
        *,
        host: str = "127.0.0.1",
        control_plane: bool = True,
        validate: bool = True,
        record: bool = True,
        zk: AsyncZooKeeper | None = None,
        session_timeout_ms: int = 6000,
        secure: SecureCluster | None = None,
    ) -> None:
        """``secure`` serves both listeners over mutual TLS with the broker's certificate of that
        secured layout, and registers with its ZooKeeper identity."""
        self.broker_id = broker_id
        self.secure = secure
        self.zk_connect = zk_connect
        self.host = host
        self.control_plane = control_plane
        self.validate = validate
        self.record = record
        self.session_timeout_ms = session_timeout_ms
        self._zk = zk
        self._owns_session = zk is None
        self._servers: dict[str, RequestServer] = {}
        self.endpoints: tuple[Endpoint, ...] = ()
        self.epoch = UNKNOWN_BROKER_EPOCH
        self.received: list[Received] = []
        self.stats = BrokerStats()
        self._changed = asyncio.Condition()
        self._forget()

    def _forget(self) -> None:
        """What a (re)started broker knows: nothing; Kafka's replica manager starts at controller epoch 0."""
        self.controller_id = -1
        self.controller_epoch = 0
        self.live_brokers: list[int] = []
        self._partitions: dict[TopicPartition, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"<SimulatedBroker {self.broker_id} epoch {self.epoch}>"

    # -- lifecycle

    async def start(self) -> None:
        """Open the listeners, then register: the registration must advertise bound ports."""
        listeners = (CONTROL_LISTENER, DATA_LISTENER) if self.control_plane else (DATA_LISTENER,)
        endpoints = []
        for listener in listeners:
            server = RequestServer(
                functools.partial(self._handle, listener),
                name=f"broker-{self.broker_id}-{listener}",
                api_keys=CONTROL_APIS,
                security=self.secure.serving(f"broker-{self.broker_id}", listener) if self.secure else None,
            )
            self._servers[listener] = server
            endpoints.append(Endpoint(listener, self.host, await server.start(self.host, 0)))
        self.endpoints = tuple(endpoints)
        if self._zk is None:
            self._zk = await self._open_session()
        self.epoch = await register_broker(self._zk, self.broker_id, self.registration().encode())

    async def stop(self) -> None:
        """Close the listeners, then the session (its ephemeral node goes with it)."""
        await asyncio.gather(*(server.close() for server in self._servers.values()))
        zk = self._zk
        if zk is None:
            return
        if self._owns_session:
            self._zk = None
            await zk.close()
        elif self.epoch != UNKNOWN_BROKER_EPOCH:
            with contextlib.suppress(NoNodeError):
                await zk.delete(broker_path(self.broker_id))

    async def bounce(self) -> int:
        """A fast restart: a new session registers again at once, so the node gets a new czxid.

        The new session connects before the old one closes, to keep the gap as short as a real
        fast bounce. On a shared session the node is deleted and created again instead. What the
        broker learnt is forgotten, as a restarted process would; listeners and their connections
        stay up. Returns the new epoch.
        """
        if self._zk is None:
            raise RuntimeError(f"broker {self.broker_id} is not started")
        old_epoch = self.epoch
        if self._owns_session:
            new = await self._open_session()
            old, self._zk = self._zk, new
            await old.close()
        else:
            with contextlib.suppress(NoNodeError):
                await self._zk.delete(broker_path(self.broker_id))
        self._forget()
        self.epoch = await register_broker(self._zk, self.broker_id, self.registration().encode())
        log.info("broker %d bounced: epoch 0x%x -> 0x%x", self.broker_id, old_epoch, self.epoch)
        return self.epoch

    async def _open_session(self) -> AsyncZooKeeper:
        zk = AsyncZooKeeper(
            self.zk_connect,
            session_timeout_ms=self.session_timeout_ms,
            security=self.secure.zk_security if self.secure else None,
        )
        await zk.start()
        return zk

    def registration(self) -> BrokerRegistration:
        return BrokerRegistration(
            broker_id=self.broker_id,
            endpoints=self.endpoints,
            listener_security_protocol_map={
                ep.listener_name: "SSL" if self.secure else "PLAINTEXT" for ep in self.endpoints
            },
            timestamp=int(time.time() * 1000),
        )

    @property
    def port(self) -> int:
        """The PLAINTEXT listener's port."""
        return self._servers[DATA_LISTENER].port

    @property
    def control_port(self) -> int | None:
        """The CONTROLLER listener's port, or None without a control plane."""
        server = self._servers.get(CONTROL_LISTENER)
        return server.port if server else None

    # -- observing

    async def wait_for(self, predicate: Callable[[Received], bool], timeout: float = 15.0) -> Received:
        """The first received request matching ``predicate``, waiting up to ``timeout`` seconds for it."""
        if not self.record:
            raise RuntimeError(f"broker {self.broker_id} records no requests (record=False)")
        checked = 0

        def first_match() -> Received | None:
            nonlocal checked
            for item in self.received[checked:]:
                checked += 1
                if predicate(item):
                    return item
            return None

        try:
            async with asyncio.timeout(timeout), self._changed:
                while (found := first_match()) is None:
                    await self._changed.wait()
                return found
        except TimeoutError:
            recent = "; ".join(r.describe() for r in self.received[-5:]) or "nothing"
            raise TimeoutError(
                f"broker {self.broker_id} (epoch 0x{self.epoch:x}): no matching request within {timeout} s; "
                f"{len(self.received)} received, the last: {recent}"
            ) from None

    def metadata(self) -> dict[str, Any]:
        """What this broker learnt from the requests it accepted (a copy).

        ``controller_id``/``controller_epoch`` come from the latest accepted control request,
        ``live_brokers`` from the latest UpdateMetadata, and ``partitions`` maps (topic, partition) to
        {leader, leader_epoch, isr}, merged from LeaderAndIsr and UpdateMetadata; empty with record=False.
        """
        return {
            "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch,
            "live_brokers": list(self.live_brokers),
            "partitions": {
                tp: {**state, "isr": list(state["isr"])} for tp, state in self._partitions.items()
            },
        }

    # -- handling

    async def _handle(self, listener: str, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        key, version = header.api_key, header.api_version
        context = current_request.get()
        error = self._check(header, body) if self.validate else ErrorCode.NONE
        if error == ErrorCode.NONE:
            self._apply(key, body)
        response = _response(key, body, error)
        stats = self.stats
        stats.requests[key] += 1
        stats.bytes[key] += context.size
        if error != ErrorCode.NONE:
            stats.rejected[key] += 1
        stats.last_response_at[key] = asyncio.get_running_loop().time()
        if self.record:
            received = Received(
                key, version, header.correlation_id, body, error, context.received_at, context.size, listener
            )
            async with self._changed:
                self.received.append(received)
                self._changed.notify_all()
        return response

    def _check(self, header: RequestHeader, body: dict[str, Any]) -> ErrorCode:
        """Kafka's order: the broker epoch first, then the controller epoch."""
        name = epoch_field(ApiKey(header.api_key), header.api_version)
        request_epoch = body[name]
        if broker_epoch_is_stale(header.api_key, header.api_version, body, self.epoch):
            reason = f"{name} 0x{request_epoch:x} < own epoch 0x{self.epoch:x}"
            return self._reject(header, body, ErrorCode.STALE_BROKER_EPOCH, reason)
        if body["controller_epoch"] < self.controller_epoch:
            reason = f"controller epoch {body['controller_epoch']} < {self.controller_epoch}"
            return self._reject(header, body, ErrorCode.STALE_CONTROLLER_EPOCH, reason)
        return ErrorCode.NONE

    def _reject(
        self, header: RequestHeader, body: dict[str, Any], error: ErrorCode, reason: str
    ) -> ErrorCode:
        log.info(
            "broker %d: %s v%d #%d from controller %d: %s: %s",
            self.broker_id,
            ApiKey(header.api_key).name,
            header.api_version,
            header.correlation_id,
            body["controller_id"],
            reason,
            error.name,
        )
        return error

    def _apply(self, key: int, body: dict[str, Any]) -> None:
        self.controller_id = body["controller_id"]
        self.controller_epoch = body["controller_epoch"]
        if key == ApiKey.UPDATE_METADATA:
            self.live_brokers = sorted(broker["id"] for broker in body["live_brokers"])
        if not self.record:
            return
        partitions = self._partitions
        if key == ApiKey.STOP_REPLICA:
            if body["delete_partitions"]:
                for topic in body["topics"]:
                    for p in topic["partition_indexes"]:
                        partitions.pop(TopicPartition(topic["name"], p), None)
            return
        for topic in body["topic_states"]:
            name = topic["topic_name"]
            for state in topic["partition_states"]:
                tp = TopicPartition(name, state["partition_index"])
                if key == ApiKey.UPDATE_METADATA and state["leader"] == LEADER_DURING_DELETE:
                    partitions.pop(tp, None)
                else:
                    partitions[tp] = {
                        "leader": state["leader"],
                        "leader_epoch": state["leader_epoch"],
                        "isr": state["isr"],
                    }


def _response(key: int, body: dict[str, Any], error: int) -> dict[str, Any]:
    """The answer Kafka gives: per-partition entries where the response has them.

    A rejected LeaderAndIsr repeats its error for every partition (Kafka's ``getErrorResponse``); a
    rejected StopReplica carries it at top level only.
    """
    if key == ApiKey.UPDATE_METADATA:
        return {"error_code": error}
    if key == ApiKey.LEADER_AND_ISR:
        partition_errors = [
            {
                "topic_name": topic["topic_name"],
                "partition_index": state["partition_index"],
                "error_code": error,
            }
            for topic in body["topic_states"]
            for state in topic["partition_states"]
        ]
    elif error == ErrorCode.NONE:
        partition_errors = [
            {"topic_name": topic["name"], "partition_index": p, "error_code": error}
            for topic in body["topics"]
            for p in topic["partition_indexes"]
        ]
    else:
        partition_errors = []
    return {"error_code": error, "partition_errors": partition_errors}


class SimulatedCluster:
    """Many simulated brokers in one process; by default all registered over one ZooKeeper session.

    ``broker_kwargs`` go to every SimulatedBroker (``session_timeout_ms`` also sets the shared session's).
    """

    def __init__(
        self, zk_connect: str, broker_ids: Iterable[int], *, shared_session: bool = True, **broker_kwargs: Any
    ) -> None:
        self.zk_connect = zk_connect
        self.broker_ids = list(broker_ids)
        self.shared_session = shared_session
        self.broker_kwargs = broker_kwargs
        self.brokers: dict[int, SimulatedBroker] = {}
        self._zk: AsyncZooKeeper | None = None

    async def start(self) -> None:
        if self.shared_session:
            timeout = self.broker_kwargs.get("session_timeout_ms", 6000)
            self._zk = AsyncZooKeeper(self.zk_connect, session_timeout_ms=timeout)
            await self._zk.start()
        self.brokers = {
            broker_id: SimulatedBroker(broker_id, self.zk_connect, zk=self._zk, **self.broker_kwargs)
            for broker_id in self.broker_ids
        }
        try:
            await asyncio.gather(*(broker.start() for broker in self.brokers.values()))
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        await asyncio.gather(*(broker.stop() for broker in self.brokers.values()), return_exceptions=True)
        if self._zk is not None:
            zk, self._zk = self._zk, None
            await zk.close()

    def describe(self) -> dict[str, Any]:
        """Each broker's epoch and ports, as the command line prints them."""
        return {
            "brokers": {
                broker_id: {"epoch": b.epoch, "control_port": b.control_port, "port": b.port}
                for broker_id, b in self.brokers.items()
            }
        }


# -- command line


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.broker_sim", description="Simulated Kafka brokers."
    )
    parser.add_argument("--zookeeper", required=True, help="ZooKeeper connect string (a chroot allowed)")
    parser.add_argument("--brokers", type=int, required=True, help="how many brokers to simulate")
    parser.add_argument("--first-id", type=int, default=1, help="the first broker id (default 1)")
    parser.add_argument("--no-control-plane", action="store_true", help="advertise no CONTROLLER listener")
    parser.add_argument("--no-validate", action="store_true", help="accept every control request")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on and advertise")
    parser.add_argument("--log-level", default="WARNING")
    return parser.parse_args(argv)


async def _run(args: argparse.Namespace) -> None:
    cluster = SimulatedCluster(
        args.zookeeper,
        range(args.first_id, args.first_id + args.brokers),
        host=args.host,
        control_plane=not args.no_control_plane,
        validate=not args.no_validate,
        record=False,
    )
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await cluster.start()
    try:
        print(json.dumps(cluster.describe()), flush=True)
        await stopping.wait()
    finally:
        await cluster.stop()
    stats = {broker_id: b.stats.as_json() for broker_id, b in cluster.brokers.items()}
    print(json.dumps({"stats": stats}), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    args = _parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    uvloop.run(_run(args))


if __name__ == "__main__":
    main()
