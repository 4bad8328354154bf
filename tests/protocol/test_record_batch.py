"""Record batch v2: walking, validation, re-stamping, and the test encoder checked against kafka-python."""

from __future__ import annotations

import contextlib
import struct
from dataclasses import replace

import cramjam
import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import CorruptRecordBatch, ProtocolError
from protocol.compression import (
    GZIP,
    LZ4,
    SNAPPY,
    SNAPPY_JAVA_MAGIC,
    ZSTD,
    UnknownCodec,
    compress,
    decompress,
)
from protocol.record_batch import (
    CRC_START,
    HEADER_SIZE,
    Record,
    RecordBatchHeader,
    build_batch,
    check_batch,
    crc_valid,
    decode_records,
    pack_batch,
    parse_batches,
    parse_header,
    restamp_in_place,
    with_base_offset_and_epoch,
)

kafka_records = pytest.importorskip("kafka.record.default_records")

blobs = st.none() | st.binary(max_size=40)
headers = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=8)), max_size=3)
records = st.lists(st.tuples(blobs, blobs, headers), max_size=6)
int64s = st.integers(-(2**63), 2**63 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)


@st.composite
def batches(draw: st.DrawFn) -> tuple[list, list[int], bytes]:
    """(records, timestamps, batch bytes) for arbitrary records and producer state."""
    recs = draw(records)
    base = draw(st.integers(0, 2**41))
    timestamps = [base + draw(st.integers(-(2**20), 2**20)) for _ in recs]
    batch = build_batch(
        recs,
        draw(st.integers(0, 2**62)),
        timestamps=timestamps,
        partition_leader_epoch=draw(int32s),
        producer_id=draw(int64s),
        producer_epoch=draw(st.integers(-(2**15), 2**15 - 1)),
        base_sequence=draw(int32s),
        transactional=draw(st.booleans()),
    )
    return recs, timestamps, batch


# ---------------------------------------------------------------- golden bytes


def test_one_record_batch_golden():
    """A batch spelled out by hand from the v2 layout; only the CRC is computed (over attributes..end)."""
    record = bytes.fromhex(
        "00"  # record attributes
        "00"  # timestamp delta 0 (zig-zag varlong)
        "00"  # offset delta 0
        "01"  # key length -1 (zig-zag 1): null key
        "02 76"  # value length 1 (zig-zag 2), "v"
        "00"  # no headers
    )
    after_crc = (
        bytes.fromhex(
            "0000"  # attributes: no compression, create time, not transactional
            "00000000"  # last_offset_delta 0
            "0000018bcfe56800"  # base_timestamp 1700000000000
            "0000018bcfe56800"  # max_timestamp
            "ffffffffffffffff"  # producer_id -1
            "ffff"  # producer_epoch -1
            "ffffffff"  # base_sequence -1
            "00000001"  # records_count 1
            "0e"  # record length 7 (zig-zag 14)
        )
        + record
    )
    expected = (
        bytes.fromhex(
            "0000000000000005"  # base_offset 5
            "00000039"  # batch_length: 4 + 1 + 4 + len(after_crc) = 57
            "00000002"  # partition_leader_epoch 2
            "02"  # magic
        )
        + struct.pack(">I", crc32c.crc32c(after_crc))
        + after_crc
    )
    assert len(after_crc) == 48  # 40 header bytes after the CRC, then 1 + 7 for the record
    built = build_batch([(None, b"v")], 5, timestamps=[1_700_000_000_000], partition_leader_epoch=2)
    assert built == expected
    assert check_batch(expected) == RecordBatchHeader(
        base_offset=5,
        batch_length=57,
        partition_leader_epoch=2,
        magic=2,
        crc=crc32c.crc32c(after_crc),
        attributes=0,
        last_offset_delta=0,
        base_timestamp=1_700_000_000_000,
        max_timestamp=1_700_000_000_000,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=1,
    )
    assert decode_records(expected) == [Record(0, 0, None, b"v")]


# ---------------------------------------------------------------- against kafka-python


@given(
    recs=records,
    first=st.integers(0, 2**41),
    deltas=st.lists(st.integers(-1000, 10**6), min_size=6, max_size=6),
    producer=st.sampled_from([(-1, -1, -1, False), (4000, 3, 17, False), (2**40, 0, 2**31 - 1, True)]),
)
def test_build_batch_is_byte_identical_to_kafka_python(recs, first, deltas, producer):
    producer_id, producer_epoch, base_sequence, transactional = producer
    timestamps = [first + deltas[i] for i in range(len(recs))]
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for offset, ((key, value, hdrs), timestamp) in enumerate(zip(recs, timestamps, strict=True)):
        builder.append(offset, timestamp=timestamp, key=key, value=value, headers=hdrs)
    theirs = bytes(builder.build())
    ours = build_batch(
        recs,
        timestamps=timestamps,
        partition_leader_epoch=0,  # kafka-python leaves the leader's field at 0; Kafka's producer at -1
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
    )
    assert ours == theirs


@given(batches(), st.integers(0, 2**40), int32s)
def test_kafka_python_reads_our_batches(batch, base_offset, epoch):
    recs, timestamps, raw = batch
    stamped = with_base_offset_and_epoch(raw, base_offset, epoch)
    theirs = kafka_records.DefaultRecordBatch(stamped)
    theirs.validate_crc()
    assert (theirs.base_offset, theirs.leader_epoch, theirs.records_count) == (base_offset, epoch, len(recs))
    read = list(theirs)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in read] == [
        (base_offset + i, timestamps[i], key, value, list(hdrs)) for i, (key, value, hdrs) in enumerate(recs)
    ]


# ---------------------------------------------------------------- round trips


@given(batches())
def test_built_batches_parse_check_and_decode_back(batch):
    recs, timestamps, raw = batch
    header = check_batch(raw)
    assert crc_valid(raw)
    assert header.size == len(raw) and header.magic == 2
    assert header.records_count == len(recs)
    assert header.last_offset_delta == max(len(recs) - 1, 0)
    assert header.max_timestamp == max(timestamps, default=0)
    assert header.compression == 0 and not header.is_control and not header.log_append_time
    decoded = decode_records(raw)
    base_timestamp = timestamps[0] if recs else 0
    assert decoded == [
        Record(i, timestamps[i] - base_timestamp, key, value, tuple(hdrs))
        for i, (key, value, hdrs) in enumerate(recs)
    ]


@given(batches(), int64s, int32s)
def test_restamping_changes_only_base_offset_and_epoch_and_keeps_the_crc(batch, base_offset, epoch):
    _, _, raw = batch
    stamped = with_base_offset_and_epoch(raw, base_offset, epoch)
    assert type(stamped) is bytes and len(stamped) == len(raw)
    assert stamped[8:12] == raw[8:12] and stamped[16:] == raw[16:]
    header = check_batch(stamped)
    assert (header.base_offset, header.partition_leader_epoch) == (base_offset, epoch)
    assert header.next_offset == base_offset + header.last_offset_delta + 1
    assert with_base_offset_and_epoch(memoryview(bytearray(raw)), base_offset, epoch) == stamped


@given(st.lists(batches(), min_size=1, max_size=4), st.integers(0, 2**62), int32s)
def test_restamping_in_place_matches_the_copying_form_batch_by_batch(many, base_offset, epoch):
    blob = bytearray(b"".join(raw for _, _, raw in many))
    walked = parse_batches(blob)
    for i, (_, pos, _) in enumerate(walked):
        restamp_in_place(blob, pos, base_offset + i, epoch)
    assert bytes(blob) == b"".join(
        with_base_offset_and_epoch(raw, base_offset + i, epoch) for i, (_, _, raw) in enumerate(many)
    )
    assert parse_batches(blob, verify_crc=True)


def test_restamping_in_place_refuses_a_short_buffer():
    with pytest.raises(CorruptRecordBatch, match="batch at byte 5: 56 bytes cannot hold"):
        restamp_in_place(bytearray(GOOD[:61]), 5, 0, 0)


@given(st.lists(batches(), min_size=1, max_size=4), st.data())
def test_walk_finds_every_batch_and_stops_cleanly_inside_a_partial_one(many, data):
    blob = b"".join(raw for _, _, raw in many)
    walked = parse_batches(blob, verify_crc=True)
    assert [(offset, size) for _, offset, size in walked] == [
        (sum(len(r) for _, _, r in many[:i]), len(raw)) for i, (_, _, raw) in enumerate(many)
    ]
    assert parse_batches(memoryview(blob)) == walked
    cut = data.draw(st.integers(0, len(blob)))
    whole = [w for w in walked if w[1] + w[2] <= cut]
    assert parse_batches(blob[:cut]) == whole
    if cut not in {0, *(offset + size for _, offset, size in walked)}:
        with pytest.raises(CorruptRecordBatch, match=r"beyond the|not a batch"):
            parse_batches(blob[:cut], allow_partial=False)


def test_empty_records_have_no_batches():
    assert parse_batches(b"") == []
    assert parse_batches(b"", allow_partial=False) == []


# ---------------------------------------------------------------- corruption


GOOD = build_batch([(b"k", b"value"), (None, b"x", [("h", b"1")])], 10, timestamps=[5, 9])


@given(st.integers(CRC_START, len(GOOD) - 1), st.integers(1, 255))
def test_any_flipped_byte_under_the_crc_is_detected(position, xor):
    bad = bytearray(GOOD)
    bad[position] ^= xor
    assert not crc_valid(bad)
    with pytest.raises(CorruptRecordBatch, match="CRC mismatch"):
        check_batch(bytes(bad))
    if bad[8:12] == GOOD[8:12]:  # the length is not covered by the CRC
        with pytest.raises(CorruptRecordBatch, match=r"batch at byte 0: CRC mismatch \(stored 0x"):
            parse_batches(bytes(bad), verify_crc=True)


def test_a_wrong_crc_field_is_detected():
    bad = bytearray(GOOD)
    bad[17] ^= 0x80
    assert not crc_valid(bad)
    assert [(offset, size) for _, offset, size in parse_batches(bytes(bad))] == [(0, len(GOOD))]
    with pytest.raises(CorruptRecordBatch, match=f"batch at byte {len(GOOD)}: CRC mismatch"):
        parse_batches(GOOD + bytes(bad), verify_crc=True)


@pytest.mark.parametrize("magic", [0, 1, 3, 0xFF])
def test_bad_magic(magic):
    bad = bytearray(GOOD)
    bad[16] = magic
    shown = magic - 256 if magic > 127 else magic
    for call in (parse_batches, parse_header, check_batch):
        with pytest.raises(CorruptRecordBatch, match=f"bad magic {shown} "):
            call(bytes(bad))
    with pytest.raises(CorruptRecordBatch, match=f"batch at byte {len(GOOD)}: bad magic"):
        parse_batches(GOOD + bytes(bad[:20]))  # even a fragment, once its magic byte is there


def test_length_below_a_header():
    bad = bytearray(GOOD)
    bad[8:12] = struct.pack(">i", HEADER_SIZE - 12 - 1)
    with pytest.raises(CorruptRecordBatch, match="length 48 is below the 49 bytes"):
        parse_batches(bytes(bad))
    bad[8:12] = struct.pack(">i", -1)
    with pytest.raises(CorruptRecordBatch, match="length -1 is below"):
        parse_batches(bytes(bad))


def test_length_beyond_the_data():
    bad = bytearray(GOOD)
    bad[8:12] = struct.pack(">i", len(GOOD))  # 12 bytes more than there are
    assert parse_batches(bytes(bad)) == []  # a fetch response's partial tail
    with pytest.raises(
        CorruptRecordBatch, match=f"length {len(GOOD)} runs beyond the {len(GOOD) - 12} bytes"
    ):
        parse_batches(bytes(bad), allow_partial=False)
    with pytest.raises(CorruptRecordBatch, match="does not match"):
        check_batch(bytes(bad))


def test_short_buffers():
    assert not crc_valid(GOOD[: HEADER_SIZE - 1])
    for call in (parse_header, check_batch, decode_records):
        with pytest.raises(CorruptRecordBatch, match="cannot hold a v2 header"):
            call(GOOD[:30])
    with pytest.raises(CorruptRecordBatch, match="cannot hold a v2 header"):
        with_base_offset_and_epoch(GOOD[:30], 0, 0)


every_codec = pytest.mark.parametrize(
    "codec", [GZIP, SNAPPY, LZ4, ZSTD], ids=["gzip", "snappy", "lz4", "zstd"]
)


@pytest.mark.parametrize(
    ("codec", "error", "match"),
    [(GZIP, UnknownCodec, "codec 1"), (7, ProtocolError, "no codec 7")],
    ids=["gzip holding plain records", "no such codec"],
)
def test_a_batch_its_codec_cannot_read_raises_unknown_codec(codec, error, match):
    mangled = bytearray(GOOD)
    mangled[21:23] = struct.pack(">h", codec)  # attributes: the codec bits
    with pytest.raises(error, match=match):
        decode_records(bytes(mangled))


@every_codec
def test_compressed_batches_decode_with_their_codec(codec):
    """Records of 200 KB, past one snappy or LZ4 block, compressed and packed as a producer would."""
    plain = build_batch([(f"k{i}".encode(), bytes(1000) + str(i).encode()) for i in range(200)])
    header = parse_header(plain)
    body = compress(codec, plain[HEADER_SIZE:])
    packed = pack_batch(replace(header, attributes=header.attributes | codec), body)
    assert crc_valid(packed) and parse_header(packed).compression == codec
    assert decode_records(packed) == decode_records(plain)


def test_snappy_reads_both_framings():
    """snappy-java's stream framing (the Java producer's) and a raw block (librdkafka's)."""
    data = bytes(range(256)) * 400
    framed = compress(SNAPPY, data)
    assert framed.startswith(SNAPPY_JAVA_MAGIC)
    assert decompress(SNAPPY, framed) == data
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_lz4_frames_have_independent_blocks_and_no_content_checksum():
    """Kafka's Java reader decompresses each block on its own and knows no content checksum."""
    frame = compress(LZ4, bytes(300_000))
    flags = frame[4]
    assert flags >> 6 == 1 and flags & 0x20 and not flags & 0x04


@given(st.data())
def test_mangled_records_raise_corrupt_record_batch_or_decode(data):
    """Whatever happens to the bytes after the header, decoding records fails only with our error."""
    raw = bytearray(GOOD)
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(HEADER_SIZE, len(raw) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(CorruptRecordBatch):
        decode_records(bytes(raw))


def test_record_errors_name_the_record():
    bad = bytearray(GOOD)
    bad[HEADER_SIZE] = 0x7E  # first record's length: 63, beyond the batch
    with pytest.raises(CorruptRecordBatch, match="record 0: length 63 does not fit"):
        decode_records(bytes(bad))
    count = bytearray(GOOD)
    count[57:61] = struct.pack(">i", 3)
    with pytest.raises(CorruptRecordBatch, match="record 2: varint runs past"):
        decode_records(bytes(count))


@every_codec
def test_decompression_stops_at_its_limit(codec):
    """A small frame can hold gigabytes of zeros: past the limit, the codec refuses instead."""
    zeros = compress(codec, bytes(3_000_000))
    assert len(zeros) < 200_000
    with pytest.raises(UnknownCodec, match="more than 1000000 bytes"):
        decompress(codec, zeros, limit=1_000_000)
    assert decompress(codec, zeros, limit=3_000_000) == bytes(3_000_000)


def test_a_snappy_java_header_cut_short_is_refused():
    with pytest.raises(UnknownCodec, match="cannot hold snappy-java's header"):
        decompress(SNAPPY, SNAPPY_JAVA_MAGIC + b"\x00\x00")
