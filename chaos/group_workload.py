"""The consumer group of a chaos run: three members sharing the acks=all topic, committing as they go.

What matters to an application during a broker death is whether its group keeps consuming and its
committed offsets survive. Each member is a confluent-kafka consumer at default settings (apart from
manual, synchronous commits after every batch), in a thread of its own; ``history.jsonl`` gets one
line per record consumed, per commit the coordinator acknowledged, and per assignment change, so the
verdict can check that every acknowledged record reached the group and that no committed offset
went back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException

from chaos import ChaosError
from chaos.workload import CLIENT_LOG
from daemon.eventlog import EventLog

log = logging.getLogger("chaos.group")

MEMBERS = 3
POLL_S = 0.2


class GroupMember:
    def __init__(self, index: int, servers: str, group: str, topic: str, history: EventLog) -> None:
        self.name = f"member-{index}"
        self.group = group
        self.topic = topic
        self.history = history
        self.committed: dict[int, int] = {}
        """Partition -> the last offset the coordinator acknowledged from this member."""
        self.consumed = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": group,
                "client.id": self.name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "logger": CLIENT_LOG,
            }
        )
        self._thread = threading.Thread(target=self._run, name=f"chaos-group-{self.name}", daemon=True)

    def start(self) -> None:
        self._consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _assigned(self, _: Consumer, partitions: list[Any]) -> None:
        self.history.emit("group_assigned", member=self.name, group=self.group,
                          partitions=sorted(p.partition for p in partitions))  # fmt: skip

    def _revoked(self, _: Consumer, partitions: list[Any]) -> None:
        self.history.emit("group_revoked", member=self.name, group=self.group,
                          partitions=sorted(p.partition for p in partitions))  # fmt: skip

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._poll_once()
        except BaseException as exc:  # reported by the workload's stop(); the thread must end cleanly
            self.error = exc
        finally:
            try:
                self._consumer.close()
            except KafkaException as exc:
                log.info("%s: leaving the group failed: %s", self.name, exc)

    def _poll_once(self) -> None:
        messages = self._consumer.consume(num_messages=500, timeout=POLL_S)
        consumed = False
        for message in messages:
            if message.error() is not None:
                continue  # librdkafka reports broker trouble here and retries by itself
            consumed = True
            self.consumed += 1
            value = message.value()
            self.history.emit(
                "group_consumed",
                member=self.name,
                topic=message.topic(),
                partition=message.partition(),
                offset=message.offset(),
                value=None if value is None else value.decode("utf-8", errors="backslashreplace"),
            )
        if consumed:
            self._commit()

    def _commit(self) -> None:
        try:
            results = self._consumer.commit(asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            code = error.name() if isinstance(error, KafkaError) else str(exc)
            self.history.emit(
                "group_commit_failed", member=self.name, group=self.group, error=code, partition=None
            )
            return
        for tp in results or []:
            if tp.offset < 0:  # librdkafka lists assigned partitions with no position yet as -1001
                continue
            if tp.error is not None:
                self.history.emit("group_commit_failed", member=self.name, group=self.group,
                                  partition=tp.partition, error=tp.error.name())  # fmt: skip
                continue
            self.committed[tp.partition] = tp.offset
            self.history.emit("group_committed", member=self.name, group=self.group, topic=tp.topic,
                              partition=tp.partition, offset=tp.offset)  # fmt: skip


class GroupWorkload:
    """:data:`MEMBERS` consumers in the group ``chaos-<run id>`` on ``topic``."""

    def __init__(
        self, servers: str, topic: str, run_id: str, history: EventLog, *, members: int = MEMBERS
    ) -> None:
        self.group = f"chaos-{run_id}"
        self.members = [GroupMember(i, servers, self.group, topic, history) for i in range(members)]

    def start(self) -> GroupWorkload:
        for member in self.members:
            member.start()
        return self

    def committed(self) -> dict[int, int]:
        """Partition -> the highest offset any member committed."""
        return highest_commits(member.committed for member in self.members)

    def drain(self, acked_ends: Mapping[int, int], timeout_s: float) -> bool:
        """Wait until the group has committed past every acknowledged record; False at the deadline."""
        return drain(self.committed, self._member_failed, acked_ends, timeout_s)

    def _member_failed(self) -> bool:
        return any(m.error is not None for m in self.members)

    def stop(self) -> None:
        for member in self.members:
            member.stop()
        failed = [f"{m.name}: {m.error!r}" for m in self.members if m.error is not None]
        if failed:
            raise ChaosError(f"group members failed: {'; '.join(failed)}")
        log.info("group %s stopped: %d records consumed", self.group, sum(m.consumed for m in self.members))


def highest_commits(members: Iterable[Mapping[int, int]]) -> dict[int, int]:
    """Partition -> the highest offset any of ``members`` (each partition -> its commit) committed."""
    out: dict[int, int] = {}
    for committed in members:
        for partition, offset in list(committed.items()):
            out[partition] = max(out.get(partition, 0), offset)
    return out


def drain(
    committed: Callable[[], Mapping[int, int]],
    failed: Callable[[], bool],
    acked_ends: Mapping[int, int],
    timeout_s: float,
) -> bool:
    """Wait until ``committed`` reaches every acknowledged end, for any group workload; False at the
    deadline or as soon as ``failed`` says a member is gone."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = committed()
        if all(now.get(p, 0) >= end for p, end in acked_ends.items()):
            return True
        if failed():
            break
        time.sleep(0.2)
    behind = {p: f"{committed().get(p, 0)}/{end}" for p, end in acked_ends.items()}
    log.warning("the group did not commit past every acknowledged record: %s", behind)
    return False
