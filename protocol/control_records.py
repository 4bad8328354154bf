"""Transaction markers: the control batches that commit or abort a producer's transaction in a partition.

When a transaction ends, its coordinator has every partition leader append one marker (WriteTxnMarkers).
A marker is a v2 record batch with the transactional and control attribute bits set, the producer's
id and epoch, no sequence (-1), and one record: its key is Kafka's ``ControlRecordType`` (int16
version 0, int16 type: 0 ABORT, 1 COMMIT), its value Kafka's ``EndTxnMarker`` (int16 version 0, int32
coordinator epoch). Consumers at ``read_committed`` skip the batch, and drop an aborted transaction's
records once they meet its ABORT marker; the log's last stable offset moves past the marker.
"""

from __future__ import annotations

import struct
from enum import IntEnum

from protocol.errors import CorruptRecordBatch, ProtocolError
from protocol.record_batch import build_batch, check_batch, decode_records

__all__ = ["CONTROL_KEY_VERSION", "END_TXN_MARKER_VERSION", "ControlType", "control_batch", "decode_marker"]

CONTROL_KEY_VERSION = 0
"""The control record key version written (Kafka's ``CURRENT_CONTROL_RECORD_KEY_VERSION``)."""
END_TXN_MARKER_VERSION = 0
"""The marker value version written (Kafka's ``CURRENT_END_TXN_MARKER_VERSION``)."""

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_NO_SEQUENCE = -1


class ControlType(IntEnum):
    """The type in a control record's key, for the two types a transaction marker can have."""

    ABORT = 0
    COMMIT = 1


def control_batch(
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One marker batch, CRC included, ending the producer's transaction (COMMIT if ``commit``, else
    ABORT) in the partition it is appended to; ``timestamp_ms`` is its only record's timestamp."""
    control_type = ControlType.COMMIT if commit else ControlType.ABORT
    key = _KEY.pack(CONTROL_KEY_VERSION, control_type)
    value = _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return build_batch(
        [(key, value)],
        base_offset,
        timestamps=[timestamp_ms],
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=_NO_SEQUENCE,
        transactional=True,
        control=True,
    )


def decode_marker(batch: bytes | bytearray | memoryview) -> tuple[ControlType, int]:
    """The type and coordinator epoch of the marker ``batch``, exactly one whole, CRC-valid batch.

    Reads as Kafka does: any key or value version from 0 up, with at least the version 0 fields.
    Raises CorruptRecordBatch for a damaged batch, ProtocolError for one that is not a marker (not a
    control batch, not one record, another control type, a key or value too short).
    """
    header = check_batch(batch)
    if not header.is_control:
        raise ProtocolError("not a control batch")
    records = decode_records(batch)
    if len(records) != 1:
        raise ProtocolError(f"a transaction marker holds one record, not {len(records)}")
    key, value = records[0].key, records[0].value
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordBatch(f"control record key of {0 if key is None else len(key)} bytes")
    key_version, type_id = _KEY.unpack_from(key)
    if key_version < 0:
        raise CorruptRecordBatch(f"control record key version {key_version}")
    if type_id not in (ControlType.ABORT, ControlType.COMMIT):
        raise ProtocolError(f"control record of type {type_id}, not a transaction marker")
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordBatch(f"transaction marker value of {0 if value is None else len(value)} bytes")
    value_version, coordinator_epoch = _VALUE.unpack_from(value)
    if value_version < 0:
        raise CorruptRecordBatch(f"transaction marker value version {value_version}")
    return ControlType(type_id), coordinator_epoch
