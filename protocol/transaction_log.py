"""The records of ``__transaction_state`` in Kafka's format, and which partition holds a transactional id.

A transaction coordinator writes one record per state change of a transactional id: the key is the
id, the value its producer, epoch, timeout, state, partitions and timestamps; a null value (tombstone)
removes an expired id. Key and value are each an int16 version followed by that version's struct, so
Kafka's own tools (``kafka-console-consumer --formatter TransactionLogMessageFormatter``,
``kafka-dump-log --transaction-log-decoder``) read what is written here, and the other way round.

* key v0 (``transactional_id``), the only version;
* value v0 and v1 (v1 is the same fields, flexible); Kafka 3.9 writes v0, and so does
  :func:`encode_transaction_value`.

``transaction_status`` is the coordinator state's id (Kafka's ``TransactionState``: 0 Empty,
1 Ongoing, 2 PrepareCommit, 3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort, 6 Dead,
7 PrepareEpochFence). As in Kafka, an Empty transaction has no partitions and is written with a null
partition list, and the partitions of a record read in state Empty are ignored.
"""

from __future__ import annotations

import functools
import io
import struct
from dataclasses import dataclass
from typing import Any

from construct import Construct, ConstructError

from protocol.consumer_offsets import partition_for
from protocol.errors import ProtocolError
from protocol.types import Int8, Int16, Int32, Int64, Layout

__all__ = [
    "KEY_VERSION",
    "STATUS_EMPTY",
    "VALUE_VERSION",
    "TransactionLogValue",
    "decode_transaction_key",
    "decode_transaction_value",
    "encode_transaction_value",
    "transaction_key",
    "transaction_partition_for",
]

_VERSION = struct.Struct(">h")
KEY_VERSION = 0
"""The only key version (Kafka's ``CoordinatorRecordType.TRANSACTION_LOG``)."""
VALUE_VERSION = 0
"""The value version written, as Kafka 3.9 writes it (v1, flexible, waits for ``transaction.version`` 1)."""
_VALUE_VERSIONS = range(2)
STATUS_EMPTY = 0
"""Kafka's ``TransactionState.EMPTY`` id: no transaction in progress, no partitions."""

Partitions = tuple[tuple[str, tuple[int, ...]], ...]
"""``((topic, (partition, ...)), ...)``: a transaction's partitions grouped by topic, in record order."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One state of a transactional id, as its ``__transaction_state`` record holds it."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    partitions: Partitions
    last_update_timestamp_ms: int
    start_timestamp_ms: int


def transaction_partition_for(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition of ``transactional_id``: Kafka's
    ``Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount``."""
    return partition_for(transactional_id, partitions)


@functools.cache
def _key_schema() -> Construct:
    k = Layout(flexible=False)
    return k.struct("transactional_id" / k.string())


@functools.cache
def _value_schema(version: int) -> Construct:
    k = Layout(flexible=version >= 1)
    partitions = k.struct("topic" / k.string(), "partition_ids" / k.array(Int32))
    return k.struct(
        "producer_id" / Int64,
        "producer_epoch" / Int16,
        "transaction_timeout_ms" / Int32,
        "transaction_status" / Int8,
        "transaction_partitions" / k.array(partitions, nullable=True),
        "transaction_last_update_timestamp_ms" / Int64,
        "transaction_start_timestamp_ms" / Int64,
    )


def _decode(data: bytes, what: str, schema: Construct) -> dict[str, Any]:
    """The struct after the version, which must run exactly to the end of ``data``."""
    stream = io.BytesIO(data)
    stream.seek(2)
    try:
        body: dict[str, Any] = schema.parse_stream(stream)
    except ConstructError as exc:
        raise ProtocolError(f"{what}: {exc}") from None
    if stream.tell() != len(data):
        raise ProtocolError(f"{what}: {len(data) - stream.tell()} bytes left over after the struct")
    return body


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise ProtocolError(f"{what}: {len(data)} bytes, too short for a version")
    version: int = _VERSION.unpack_from(data)[0]
    return version


def transaction_key(transactional_id: str) -> bytes:
    """The record key of ``transactional_id``: key v0."""
    try:
        built: bytes = _key_schema().build({"transactional_id": transactional_id})
    except ConstructError as exc:
        raise ProtocolError(f"TransactionLogKey: {exc}") from None
    return _VERSION.pack(KEY_VERSION) + built


def decode_transaction_key(data: bytes) -> str:
    """The transactional id of a key; ProtocolError for another version or malformed bytes."""
    version = _version(data, "TransactionLogKey")
    if version != KEY_VERSION:
        raise ProtocolError(f"TransactionLogKey: unknown version {version}")
    transactional_id: str = _decode(data, "TransactionLogKey v0", _key_schema())["transactional_id"]
    return transactional_id


def encode_transaction_value(value: TransactionLogValue) -> bytes:
    """The record value of ``value``: value v0, with a null partition list in state Empty.

    Raises ValueError for an Empty state that names partitions, as Kafka refuses to write one.
    """
    empty = value.transaction_status == STATUS_EMPTY
    if empty and value.partitions:
        raise ValueError(f"an Empty transaction has no partitions: {value.partitions}")
    body = {
        "producer_id": value.producer_id,
        "producer_epoch": value.producer_epoch,
        "transaction_timeout_ms": value.transaction_timeout_ms,
        "transaction_status": value.transaction_status,
        "transaction_partitions": None
        if empty
        else [{"topic": topic, "partition_ids": list(ids)} for topic, ids in value.partitions],
        "transaction_last_update_timestamp_ms": value.last_update_timestamp_ms,
        "transaction_start_timestamp_ms": value.start_timestamp_ms,
    }
    try:
        built: bytes = _value_schema(VALUE_VERSION).build(body)
    except ConstructError as exc:
        raise ProtocolError(f"TransactionLogValue: {exc}") from None
    return _VERSION.pack(VALUE_VERSION) + built


def decode_transaction_value(data: bytes) -> TransactionLogValue:
    """A value of v0 or v1; ProtocolError for another version or malformed bytes (a tombstone is the
    caller's: it has no bytes to decode)."""
    version = _version(data, "TransactionLogValue")
    if version not in _VALUE_VERSIONS:
        raise ProtocolError(f"TransactionLogValue: unknown version {version}")
    body = _decode(data, f"TransactionLogValue v{version}", _value_schema(version))
    status: int = body["transaction_status"]
    listed = body["transaction_partitions"] or ()
    return TransactionLogValue(
        producer_id=body["producer_id"],
        producer_epoch=body["producer_epoch"],
        transaction_timeout_ms=body["transaction_timeout_ms"],
        transaction_status=status,
        partitions=()
        if status == STATUS_EMPTY
        else tuple((p["topic"], tuple(p["partition_ids"])) for p in listed),
        last_update_timestamp_ms=body["transaction_last_update_timestamp_ms"],
        start_timestamp_ms=body["transaction_start_timestamp_ms"],
    )
