"""The fuzz targets: each takes arbitrary bytes and may raise only the refusal its caller handles.

* ``request``: a whole request frame as a listener reads it (header, then the body of its API and
  version); ProtocolError is the refusal, and the listener closes the connection on it.
* ``request_body``: the first bytes choose an implemented API, version and wire dialect (the seed's
  layouts as well as Kafka's of the same numbers), the rest is its body, so the fuzzer spends its
  time inside the decoders rather than on unknown API keys.
* ``records``: a Produce request's records blob (record batches v2: headers, CRCs, records); a
  ProtocolError (CorruptRecordBatch) is answered CORRUPT_MESSAGE.
* ``znodes``: the JSON (or text) of every znode the daemons read; a decoder logs what it cannot read
  and returns None, so nothing may escape at all.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable

from protocol import DEFAULT_DIALECT, ProtocolError, WireDialect, decode_request
from protocol.api import ApiSpec
from protocol.record_batch import build_batch, check_batch, decode_records, parse_batches
from protocol.registry import APIS
from zkstore import znodes

MAX_FRAME = 1 << 20
_SPECS = sorted(APIS.values(), key=lambda s: s.key)
_LAYOUTS: dict[int, list[tuple[int, WireDialect]]] = {
    spec.key: [
        *((v, DEFAULT_DIALECT) for v in spec.versions_in(DEFAULT_DIALECT)),
        *((v, WireDialect.KAFKA) for v in spec.versions if spec.is_seed_layout(v, DEFAULT_DIALECT)),
    ]
    for spec in _SPECS
}
"""Every distinct layout of an API: its versions in the default dialect, then Kafka's layouts of the
numbers the default dialect gives the seed's."""


def _decode(data: bytes, dialect: WireDialect) -> None:
    with contextlib.suppress(ProtocolError):
        decode_request(struct.pack(">i", len(data)) + data, MAX_FRAME, dialect=dialect)


def request(data: bytes) -> None:
    """``data`` is the frame behind its size prefix, as a listener reads it (the prefix is checked
    alone, before anything is allocated)."""
    _decode(data, DEFAULT_DIALECT)


def request_body(data: bytes) -> None:
    if len(data) < 2:
        return
    spec: ApiSpec = _SPECS[data[0] % len(_SPECS)]
    layouts = _LAYOUTS[spec.key]
    version, dialect = layouts[data[1] % len(layouts)]
    header = struct.pack(">hhih", spec.key, version, 7, -1)  # correlation id 7, null client id
    if spec.is_flexible(version, dialect):
        header += b"\x00"  # no tagged fields in the header
    _decode(header + data[2:], dialect)


def records(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):  # as the produce path reads them: whole batches, CRCs
        for _header, offset, size in parse_batches(data, allow_partial=False, verify_crc=True):
            batch = data[offset : offset + size]
            check_batch(batch)
            decode_records(batch)


_ZNODE_DECODERS: list[tuple[str, Callable[[bytes | None, str], object]]] = [
    ("/brokers/ids/1", znodes.decode_broker_registration),
    (znodes.CONTROLLER, znodes.decode_controller_registration),
    (znodes.CONTROLLER_EPOCH, znodes.decode_controller_epoch),
    ("/brokers/topics/t", znodes.decode_topic_assignment),
    ("/brokers/topics/t/partitions/0/state", znodes.decode_leader_isr_state),
    ("/admin/reassign_partitions", znodes.decode_reassignment),
    ("/admin/preferred_replica_election", znodes.decode_preferred_replica_election),
    ("/isr_change_notification/isr_change_0", znodes.decode_isr_change_notification),
]


def znode(data: bytes) -> None:
    if not data:
        return
    path, decode = _ZNODE_DECODERS[data[0] % len(_ZNODE_DECODERS)]
    decode(data[1:], path)


SEEDS: dict[str, list[bytes]] = {
    "records": [
        build_batch([(b"k", b"v"), (None, b"value", [("h", b"x")])])
        + build_batch([(b"k2", None)], 2, producer_id=7, producer_epoch=0, base_sequence=0)
    ],
}
"""Valid inputs a target's corpus starts from when it is empty: random bytes seldom make a whole
record batch with a right CRC, and the fuzzer mutates from there."""

TARGETS: dict[str, Callable[[bytes], None]] = {
    "request": request,
    "request_body": request_body,
    "records": records,
    "znodes": znode,
}
