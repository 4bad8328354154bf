"""Request handling on the handler threads (Kafka's KafkaApis): decode, validate, dispatch, encode.

Control requests are checked as Apache Kafka checks them (reference §4.1), broker epoch first:

* per-broker versions (LeaderAndIsr v2, UpdateMetadata v5, StopReplica v1): ``broker_epoch`` older
  than this broker's epoch is STALE_BROKER_EPOCH; -1 (unknown) and newer are accepted;
* the seed's max-epoch versions (v5 / v7 / v4): rejected iff ``max_broker_epoch`` is below this
  broker's epoch (-1 included: it has no "unknown" meaning there);
* Apache Kafka 3.9's versions (LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4): KIP-380's
  per-broker rule, and a request that says it comes from a KRaft controller (``is_kraft_controller``,
  a ZooKeeper migration this broker takes no part in) is refused with UNKNOWN_SERVER_ERROR, the
  answer of a Kafka broker without ``zookeeper.metadata.migration.enable``.

Which layout a version number names is the broker's wire dialect (``inter.broker.protocol.version``,
``protocol/ibp.py``): every control request is read, and answered, in it. In the SEED dialect (the
default) both epoch forms are accepted at any time, so a cluster can switch protocols one controller
restart at a time.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from broker.authorization import Denial, RequestAuthorizer
from broker.controller_guard import ControllerEpochGuard
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.request_channel import Close, Outcome, Request, Result
from daemon.eventlog import EventLog
from protocol import (
    CONTROL_APIS,
    DEFAULT_DIALECT,
    UNKNOWN_BROKER_EPOCH,
    ApiKey,
    ErrorCode,
    ProtocolError,
    RequestHeader,
    UnsupportedVersionError,
    WireDialect,
    encode_response,
    epoch_field,
    error_response_body,
    message_codec,
    supported_versions,
)
from protocol.control_requests import (
    answers_by_topic_id,
    broker_epoch_is_stale,
    control_error,
    from_kraft_controller,
    leader_and_isr_answer,
    leader_and_isr_orders,
    stop_replica_answer,
    stop_replica_orders,
)
from protocol.registry import api_spec

log = logging.getLogger("broker.apis")

Reply = dict[str, Any] | Future[dict[str, Any]] | Close | None
"""A response body; a future of one for requests that wait (acks=all, long-polling fetches); None for
none at all (acks=0); Close to drop the connection instead (a failed acks=0 produce, as in Kafka)."""
Handler = Callable[["Request", dict[str, Any]], Reply]
"""A request handler: the request (header, listener, peer) and its decoded body -> its reply."""


ADVERTISED_MAX_VERSIONS: dict[int, int] = {
    ApiKey.FETCH: 11,
    ApiKey.LIST_OFFSETS: 5,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 3,
}
"""Versions served but not offered to clients: the flexible ones of the replication APIs, for Apache
Kafka's replica fetchers, which name their versions from their IBP without asking (Fetch v17,
ListOffsets v9 and OffsetForLeaderEpoch v4 at IBP 3.9; ``broker/fetch_versions.py``). Clients keep
the versions they negotiated before: one on Fetch v13+ would name topics by id, which it learns from
Metadata v10+, not served here, and ListOffsets v7+ may ask for timestamps (-3, -4, -5) not served."""


def api_versions_entries(
    api_keys: Collection[int], dialect: WireDialect = DEFAULT_DIALECT
) -> list[dict[str, int]]:
    """ApiVersions' list for the APIs served: each with the oldest and newest version implemented in
    ``dialect`` (the broker's wire dialect), up to ``ADVERTISED_MAX_VERSIONS``."""
    versions = supported_versions(dialect)
    return [
        {
            "api_key": int(k),
            "min_version": min(versions[k]),
            "max_version": min(max(versions[k]), ADVERTISED_MAX_VERSIONS.get(k, max(versions[k]))),
        }
        for k in sorted(api_keys)
        if k in versions
    ]


@dataclass
class BrokerIdentity:
    """Who this broker is now; ``epoch`` changes at every registration (read from any thread)."""

    broker_id: int
    epoch: int = UNKNOWN_BROKER_EPOCH


LARGE_CONTROL_BYTES = 1 << 20
"""A control request this big (a full UpdateMetadata of some 20,000 partitions and up) is decoded and
applied with the cyclic collector held off, and what it leaves alive is frozen afterwards."""


@contextlib.contextmanager
def _collector_held() -> Iterator[None]:
    """Hold the cyclic collector off while a big control request is decoded and applied, then freeze
    what survived (the new metadata and partition state, which live until the next such request).

    Decoding a million-partition UpdateMetadata builds millions of objects, none in a cycle; each
    collection meanwhile scanned them all again with the GIL held (0.5 to 0.8 s each, the data plane's
    worst stalls). Frozen objects are still freed by their reference counts when replaced.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


class KafkaApis:
    def __init__(
        self,
        identity: BrokerIdentity,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        events: EventLog,
        *,
        handlers: Mapping[int, Handler] | None = None,
        on_handled: Callable[[Request, int], None] | None = None,
        guard: ControllerEpochGuard | None = None,
        authorization: RequestAuthorizer | None = None,
        on_denied: Callable[[Request, Denial], None] | None = None,
        dialect: WireDialect = DEFAULT_DIALECT,
    ) -> None:
        self.identity = identity
        self.dialect = dialect
        """The wire dialect of ``inter.broker.protocol.version``: requests are read and answered in it."""
        self.authorization = authorization
        """The ACL checks each request passes before its handler runs (None: no authorizer)."""
        self.on_denied = on_denied
        self.guard = guard
        """Confirms new controller epochs in ZooKeeper before a control request is believed."""
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.events = events
        self.on_handled = on_handled
        self._handlers: dict[int, Handler] = {
            ApiKey.LEADER_AND_ISR: self._leader_and_isr,
            ApiKey.UPDATE_METADATA: self._update_metadata,
            ApiKey.STOP_REPLICA: self._stop_replica,
            ApiKey.SASL_HANDSHAKE: self._sasl_after_authentication,
            ApiKey.SASL_AUTHENTICATE: self._sasl_after_authentication,
            **(handlers or {}),
        }

    def register(self, api_key: int, handler: Handler) -> None:
        """Add a data-plane API's handler."""
        self._handlers[api_key] = handler

    @property
    def api_keys(self) -> frozenset[int]:
        return frozenset(self._handlers)

    # -- entry point (handler threads)

    def handle(self, request: Request) -> Outcome:
        header = request.header
        handler = self._handlers.get(header.api_key)
        if handler is None:
            return Close(f"API key {header.api_key} is not served by this broker")
        control = header.api_key in CONTROL_APIS
        if control and len(request.frame) - request.body_offset >= LARGE_CONTROL_BYTES:
            with _collector_held():
                return self._handle(request, handler, control)
        return self._handle(request, handler, control)

    def _handle(self, request: Request, handler: Handler, control: bool) -> Outcome:
        header = request.header
        try:
            body = message_codec(header.api_key, header.api_version, "request", self.dialect).decode(
                request.frame, request.body_offset
            )
        except ProtocolError as exc:
            return Close(f"malformed {ApiKey(header.api_key).name} v{header.api_version} request: {exc}")
        started = time.monotonic()
        if control:
            request.own_epoch = self.identity.epoch
            self._received(request, body)
        refused, body = self._authorize(request, body)
        if refused is None and control:
            # An earlier generation's request is STALE_BROKER_EPOCH before any controller-epoch check,
            # as Kafka orders them, even when ZooKeeper already names a newer controller.
            refused = self._refusal(request, body) or self._unconfirmed(request, body)
        if refused is not None:
            if control:
                self._handled(request, body, refused, started)
            return self._encode(request, refused)
        reply = handler(request, body)
        if reply is None or isinstance(reply, Close):
            return reply
        if isinstance(reply, Future):
            return self._when_done(request, reply)
        if control:
            self._handled(request, body, reply, started)
        return self._encode(request, reply)

    def _authorize(
        self, request: Request, body: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """(the whole request's refusal or None, the body the handler may run on)."""
        if self.authorization is None or not self.authorization.enabled:
            return None, body
        header = request.header
        gate = self.authorization.gate(
            request.principal, request.host, header.api_key, header.api_version, body
        )
        for denial in gate.denials:
            self.events.emit(
                "authorization_denied",
                api=api_spec(header.api_key).name,
                principal=request.principal,
                host=request.host,
                listener=request.listener,
                operation=denial.operation.name,
                resource_type=denial.resource_type.name,
                resource=denial.name,
            )
            if self.on_denied is not None:
                self.on_denied(request, denial)
        if gate.merge is not None or gate.keep is not None:
            request.finish = gate.finish
        request.describable = gate.describable
        if gate.refusal is not None and header.api_key in CONTROL_APIS:
            return self._control_error(request, body, gate.refusal["error_code"]), body
        return gate.refusal, gate.body

    def _encode(self, request: Request, response: dict[str, Any]) -> bytes:
        if request.finish is not None:
            response = request.finish(response)
        header = request.header
        if self.on_handled is not None:
            self.on_handled(request, response.get("error_code", ErrorCode.NONE))
        return encode_response(
            header.api_key, header.api_version, header.correlation_id, response, dialect=self.dialect
        )

    def _when_done(self, request: Request, reply: Future[dict[str, Any]]) -> Future[Result]:
        """The encoded response once a waiting request completes (on whichever thread completes it)."""
        out: Future[Result] = Future()

        def done(finished: Future[dict[str, Any]]) -> None:
            try:
                out.set_result(self._encode(request, finished.result()))
            except Exception as exc:  # a bug must close the connection, not leave the client waiting
                log.exception("error completing %s", request.header)
                out.set_result(Close(f"internal error completing the request: {exc!r}"))

        reply.add_done_callback(done)
        return out

    def api_versions_response(self, header: RequestHeader) -> bytes:
        """ApiVersions' answer, as given to a SASL client before it has authenticated."""
        body = {
            "error_code": ErrorCode.NONE,
            "api_keys": api_versions_entries(self.api_keys, self.dialect),
            "throttle_time_ms": 0,
        }
        return encode_response(header.api_key, header.api_version, header.correlation_id, body)

    def unsupported_version_response(self, exc: UnsupportedVersionError) -> bytes:
        """UNSUPPORTED_VERSION in the API's oldest layout; for ApiVersions, with what is supported."""
        version = min(supported_versions(self.dialect)[ApiKey(exc.api_key)])
        body = error_response_body(exc.api_key, version, ErrorCode.UNSUPPORTED_VERSION, dialect=self.dialect)
        if exc.api_key == ApiKey.API_VERSIONS:
            body["api_keys"] = api_versions_entries(self.api_keys, self.dialect)
        return encode_response(exc.api_key, version, exc.correlation_id, body, dialect=self.dialect)

    @staticmethod
    def _sasl_after_authentication(request: Request, body: dict[str, Any]) -> dict[str, Any]:
        """SASL requests reach the handlers only once a connection is past authentication (or on a
        listener without SASL): ILLEGAL_SASL_STATE, as Kafka answers. Being served here also lists
        them in ApiVersions, which clients read before they authenticate."""
        header = request.header
        return error_response_body(header.api_key, header.api_version, ErrorCode.ILLEGAL_SASL_STATE)

    # -- control requests

    def _refusal(self, request: Request, body: dict[str, Any]) -> dict[str, Any] | None:
        """The whole request's refusal before it is applied: from a KRaft controller, or for an earlier
        registration of this broker (Kafka's ``isBrokerEpochStale``, which also throws for the first)."""
        header = request.header
        if from_kraft_controller(body):
            log.warning(
                "%s v%d (correlation id %d) from KRaft controller %d refused: no ZooKeeper migration here",
                api_spec(header.api_key).name,
                header.api_version,
                header.correlation_id,
                body["controller_id"],
            )
            return self._control_error(request, body, ErrorCode.UNKNOWN_SERVER_ERROR)
        if broker_epoch_is_stale(header.api_key, header.api_version, body, request.own_epoch, self.dialect):
            return self._control_error(request, body, ErrorCode.STALE_BROKER_EPOCH)
        return None

    def _control_error(self, request: Request, body: dict[str, Any], code: ErrorCode) -> dict[str, Any]:
        header = request.header
        by_id = answers_by_topic_id(header.api_version, self.dialect)
        return control_error(header.api_key, body, code, by_topic_id=by_id)

    def _unconfirmed(self, request: Request, body: dict[str, Any]) -> dict[str, Any] | None:
        """The refusal of a control request whose controller epoch ZooKeeper does not confirm."""
        if self.guard is None:
            return None
        refusal = self.guard.check(body["controller_id"], body["controller_epoch"])
        if refusal is None:
            return None
        found = refusal.zookeeper
        self.events.emit(
            "controller_epoch_unconfirmed",
            api=api_spec(request.header.api_key).name,
            listener=request.listener,
            peer=request.peer,
            controller_id=body["controller_id"],
            controller_epoch=body["controller_epoch"],
            zk_controller_id=found.controller_id if found else None,
            zk_controller_epoch=found.epoch if found else None,
            error=refusal.code.name,
            reason=refusal.reason,
        )
        return self._control_error(request, body, refusal.code)

    def _leader_and_isr(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        header = request.header
        code, errors = self.replica_manager.become_leader_or_follower(
            body, leader_and_isr_orders(body), header.correlation_id
        )
        by_id = answers_by_topic_id(header.api_version, self.dialect)
        return leader_and_isr_answer(body, by_id, code, errors)

    def _update_metadata(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        if not self.replica_manager.accept_controller_epoch(body["controller_epoch"]):
            return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH}
        removed = self.metadata_cache.update(body)
        if removed:
            log.info("UpdateMetadata removed %d partitions of deleted topics", len(removed))
        return {"error_code": ErrorCode.NONE}

    def _stop_replica(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        code, errors = self.replica_manager.stop_replicas(body["controller_epoch"], stop_replica_orders(body))
        return stop_replica_answer(code, errors)

    # -- event log

    def _epochs(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        header = request.header
        field = epoch_field(ApiKey(header.api_key), header.api_version, self.dialect)
        return {
            "controller_id": body["controller_id"],
            "controller_epoch": body["controller_epoch"],
            field: body[field],
            "broker_epoch_now": request.own_epoch,
        }

    def _received(self, request: Request, body: dict[str, Any]) -> None:
        header = request.header
        self.events.emit(
            "control_request_received",
            api=api_spec(header.api_key).name,
            api_version=header.api_version,
            correlation_id=header.correlation_id,
            listener=request.listener,
            queue_ms=round((request.dequeued_at - request.received_at) * 1000, 3),
            **self._epochs(request, body),
        )

    def _handled(
        self, request: Request, body: dict[str, Any], response: dict[str, Any], started: float
    ) -> None:
        header = request.header
        error = ErrorCode(response.get("error_code", ErrorCode.NONE))
        by_topic = [p for t in response.get("topics", []) for p in t["partition_errors"]]
        partition_errors = [p for p in response.get("partition_errors", by_topic) if p["error_code"]]
        self.events.emit(
            "control_request_handled",
            api=api_spec(header.api_key).name,
            api_version=header.api_version,
            correlation_id=header.correlation_id,
            listener=request.listener,
            error=error.name,
            partition_errors=len(partition_errors),
            queue_ms=round((request.dequeued_at - request.received_at) * 1000, 3),
            handle_ms=round((time.monotonic() - started) * 1000, 3),
            **self._epochs(request, body),
        )
        if error in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.STALE_CONTROLLER_EPOCH):
            log.warning(
                "%s v%d (correlation id %d) from controller %d epoch %d rejected with %s; broker epoch %d",
                api_spec(header.api_key).name,
                header.api_version,
                header.correlation_id,
                body["controller_id"],
                body["controller_epoch"],
                error.name,
                request.own_epoch,
            )
