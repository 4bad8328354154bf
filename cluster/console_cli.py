"""``python -m cluster produce|consume``: the console producer and consumer, with confluent-kafka.

Records go to and come from the brokers' client listeners (``--bootstrap-server``, else those of
``--dir``'s cluster or of ``/brokers/ids``): produce waits for every acknowledgement; consume reads with
``assign()``, no group membership and no commits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from cluster.admin_cli import (
    bootstrap_servers,
    fail,
    guarded,
    kafka_client,
    print_json,
    print_table,
    usage_error,
)
from placement.errors import AdminError

__all__ = [
    "ConsumedRecord",
    "ProduceReport",
    "consume_records",
    "passing_consume_error",
    "produce_records",
    "register",
]

if TYPE_CHECKING:  # confluent-kafka is imported when a command needs it: the CLI starts faster
    from confluent_kafka import Consumer, KafkaError, Message

CONSUMER_GROUP = "python-m-cluster-consume"
"""librdkafka requires a group.id even for assign(); nothing is ever committed under it."""
UNASSIGNED_PARTITION = -1
"""librdkafka's RD_KAFKA_PARTITION_UA: let the partitioner choose."""


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``produce`` and ``consume`` to ``python -m cluster``'s subparsers."""
    client = argparse.ArgumentParser(add_help=False, parents=[common])
    client.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT,...",
        help="brokers to connect to (default: --dir's brokers, else the PLAINTEXT endpoints in ZooKeeper)",
    )
    client.add_argument("--topic", required=True)
    client.add_argument("--partition", type=int)

    produce = commands.add_parser(
        "produce", parents=[client], help="produce stdin's lines (or --count records) with confluent-kafka"
    )
    produce.add_argument("--acks", choices=("all", "1", "0"), default="all")
    produce.add_argument("--count", type=int, help="generate this many records instead of reading stdin")
    produce.add_argument("--key-separator", help="split each line into key and value at this string")
    produce.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for acknowledgements")
    produce.set_defaults(run=guarded(run_produce))

    consume = commands.add_parser(
        "consume", parents=[client], help="print records: partition, offset, key, value (tab-separated)"
    )
    consume.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    consume.add_argument("--max-messages", type=int, help="stop after this many records")
    consume.add_argument("--timeout", type=float, help="stop after this many seconds without a record")
    consume.set_defaults(run=guarded(run_consume))


@dataclass
class AcknowledgedRange:
    """Records acknowledged in one partition; no offsets with acks=0, where the broker sends no answer."""

    count: int = 0
    first_offset: int | None = None
    last_offset: int | None = None

    def add(self, offset: int | None) -> None:
        self.count += 1
        if offset is not None:
            self.first_offset = offset if self.first_offset is None else min(self.first_offset, offset)
            self.last_offset = offset if self.last_offset is None else max(self.last_offset, offset)


@dataclass
class ProduceReport:
    topic: str
    sent: int = 0
    acknowledged: int = 0
    partitions: dict[int, AcknowledgedRange] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def produce_records(
    brokers: Mapping[str, str],
    topic: str,
    records: Iterable[tuple[bytes | None, bytes]],
    *,
    partition: int | None = None,
    acks: str = "all",
    timeout_s: float = 30.0,
) -> ProduceReport:
    """Produce ``(key, value)`` records and wait for every delivery report.

    Idempotence is off: it needs InitProducerId, which these brokers do not serve. ``message.timeout.ms``
    bounds each record, so an unreachable leader ends in a delivery error instead of a hang.
    """
    from confluent_kafka import KafkaException, Producer

    report = ProduceReport(topic)
    config = {
        **brokers,
        "acks": acks,
        "enable.idempotence": False,
        "linger.ms": 5,
        "message.timeout.ms": max(1, int(timeout_s * 1000)),
    }
    try:
        producer = Producer(config)
    except KafkaException as exc:
        raise AdminError(f"cannot create a producer: {exc}") from None

    def delivered(err: Any, message: Any) -> None:
        if err is not None:
            report.errors.append(str(err))
            return
        report.acknowledged += 1
        offset = message.offset() if message.offset() >= 0 else None
        report.partitions.setdefault(message.partition(), AcknowledgedRange()).add(offset)

    chosen = UNASSIGNED_PARTITION if partition is None else partition
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=chosen, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                producer.poll(0.1)
        report.sent += 1
        producer.poll(0)
    remaining = producer.flush(timeout_s + 5.0)
    if remaining:
        report.errors.append(f"{remaining} records still unacknowledged after {timeout_s + 5.0:g} s")
    return report


def _stdin_records(separator: str | None) -> Iterator[tuple[bytes | None, bytes]]:
    for line in sys.stdin:
        text = line.rstrip("\r\n")
        if separator is not None and separator in text:
            key, _, value = text.partition(separator)
            yield key.encode(), value.encode()
        else:
            yield None, text.encode()


def run_produce(args: argparse.Namespace) -> int:
    if args.count is not None and args.count < 0:
        return usage_error("--count cannot be negative")
    brokers = kafka_client(args, bootstrap_servers(args))
    if args.count is not None:
        records: Iterable[tuple[bytes | None, bytes]] = (
            (None, f"record-{i}".encode()) for i in range(args.count)
        )
    else:
        records = _stdin_records(args.key_separator)
    report = produce_records(
        brokers, args.topic, records, partition=args.partition, acks=args.acks, timeout_s=args.timeout
    )
    if args.json:
        print_json(
            {
                "topic": report.topic,
                "sent": report.sent,
                "acknowledged": report.acknowledged,
                "partitions": [{"partition": p, **asdict(r)} for p, r in sorted(report.partitions.items())],
                "errors": report.errors,
            }
        )
    else:
        print(f"{report.acknowledged} of {report.sent} records acknowledged (acks={args.acks}).")
        rows = [(p, r.count, r.first_offset, r.last_offset) for p, r in sorted(report.partitions.items())]
        if rows:
            print_table(("PARTITION", "RECORDS", "FIRST-OFFSET", "LAST-OFFSET"), rows)
    if report.errors or report.acknowledged != report.sent:
        failed = report.sent - report.acknowledged
        first = report.errors[0] if report.errors else "no delivery report"
        return fail(f"{failed} of {report.sent} records not acknowledged: {first}")
    return 0


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: str | None
    value: str | None


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def consume_records(
    brokers: Mapping[str, str],
    topic: str,
    on_record: Callable[[ConsumedRecord], None],
    *,
    partition: int | None = None,
    from_beginning: bool = False,
    max_messages: int | None = None,
    idle_timeout_s: float | None = None,
) -> int:
    """Read ``topic`` (or one partition) with assign(): no group membership, no commits; returns the count.

    Stops after ``max_messages`` records, or once no record has come for ``idle_timeout_s`` seconds (as the
    console consumer's --timeout-ms), else runs until interrupted.
    """
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition

    config = {
        **brokers,
        "group.id": CONSUMER_GROUP,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    }
    try:
        consumer = Consumer(config)
    except KafkaException as exc:
        raise AdminError(f"cannot create a consumer: {exc}") from None
    count = 0
    try:
        partitions = _partitions_to_read(consumer, brokers, topic, partition, idle_timeout_s)
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END
        consumer.assign([TopicPartition(topic, p, start) for p in partitions])
        last_record = time.monotonic()
        while max_messages is None or count < max_messages:
            wanted = 500 if max_messages is None else min(500, max_messages - count)
            batch = consumer.consume(num_messages=wanted, timeout=0.2)
            for message in batch:
                record = _record_of(message, topic)
                if record is not None:
                    count += 1
                    on_record(record)
            if batch:
                last_record = time.monotonic()
            elif idle_timeout_s is not None and time.monotonic() - last_record >= idle_timeout_s:
                break
    finally:
        consumer.close()
    return count


def _partitions_to_read(
    consumer: Consumer,
    brokers: Mapping[str, str],
    topic: str,
    partition: int | None,
    idle_timeout_s: float | None,
) -> list[int]:
    """The topic's partitions (or the one asked for), or an AdminError naming what is missing."""
    from confluent_kafka import KafkaException

    try:
        metadata = consumer.list_topics(topic, timeout=max(10.0, idle_timeout_s or 0.0))
    except KafkaException as exc:
        raise AdminError(f"no metadata for {topic} from {brokers['bootstrap.servers']}: {exc}") from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        reason = found.error.str() if found is not None and found.error is not None else "unknown topic"
        raise AdminError(f"topic {topic}: {reason}")
    partitions = sorted(found.partitions)
    if partition is None:
        return partitions
    if partition not in partitions:
        raise AdminError(f"topic {topic} has no partition {partition} (it has {len(partitions)})")
    return [partition]


def _record_of(message: Message, topic: str) -> ConsumedRecord | None:
    """The record a consumed message carries; None for a passing event (a partition's end)."""
    error = message.error()
    if error is not None:
        if not passing_consume_error(error):
            raise AdminError(f"consuming {topic}: {error.str()}")
        return None
    partition, offset = message.partition(), message.offset()
    if partition is None or offset is None:  # only error events lack them
        return None
    stamp_type, stamp = message.timestamp()
    return ConsumedRecord(
        topic, partition, offset, stamp if stamp_type else None, _text(message.key()), _text(message.value())
    )


def passing_consume_error(error: KafkaError) -> bool:
    """A consume error to read past: the end of a partition, or one librdkafka retries by itself."""
    from confluent_kafka import KafkaError

    # librdkafka's partition-end code, which confluent-kafka exposes under an underscore name.
    return bool(error.code() == KafkaError._PARTITION_EOF or error.retriable())  # noqa: SLF001


def run_consume(args: argparse.Namespace) -> int:
    if args.max_messages is not None and args.max_messages < 1:
        return usage_error("--max-messages must be at least 1")
    brokers = kafka_client(args, bootstrap_servers(args))

    def show(record: ConsumedRecord) -> None:
        if args.json:
            print(json.dumps(asdict(record)), flush=True)
        else:
            key = "null" if record.key is None else record.key
            value = "null" if record.value is None else record.value
            print(f"{record.partition}\t{record.offset}\t{key}\t{value}", flush=True)

    try:
        count = consume_records(
            brokers,
            args.topic,
            show,
            partition=args.partition,
            from_beginning=args.from_beginning,
            max_messages=args.max_messages,
            idle_timeout_s=args.timeout,
        )
    except KeyboardInterrupt:
        return 0
    if args.max_messages is not None and count < args.max_messages:
        return fail(f"no record for {args.timeout:g} s: got {count} of {args.max_messages} messages")
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
