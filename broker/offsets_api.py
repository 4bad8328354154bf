"""ListOffsets (v1-v9) and OffsetForLeaderEpoch (v0-v4): where a log starts, ends, and where an epoch ended.

ListOffsets answers consumers looking for a starting point: timestamp -1 is the latest offset a
consumer may read (the high watermark, or the last stable offset for ``isolation_level`` 1,
read_committed, v2+), -2 the log start offset, anything else the first record at or after that time
below that same bound. OffsetForLeaderEpoch is how a new follower (or a consumer after a leader change,
KIP-320) finds where its log diverged from the leader's: the end offset of the largest epoch not
above the one asked, from the leader epoch cache.

Their flexible versions (ListOffsets v6+, OffsetForLeaderEpoch v4) are read alike; they are served for
Apache Kafka's replica fetchers, which ask for -1 and -2 only, and not offered to clients
(``broker.apis.ADVERTISED_MAX_VERSIONS``).
"""

from __future__ import annotations

from typing import Any

from broker.partition import PartitionError
from broker.replica_manager import ReplicaManager
from broker.request_channel import Request
from protocol import ErrorCode
from zkstore.znodes import TopicPartition

LATEST = -1
EARLIEST = -2
UNDEFINED = -1
READ_COMMITTED = 1


class OffsetsApi:
    def __init__(self, rm: ReplicaManager) -> None:
        self.rm = rm

    def list_offsets(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        committed = body.get("isolation_level", 0) == READ_COMMITTED
        return {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "name": topic["name"],
                    "partitions": [
                        self._list_offset(TopicPartition(topic["name"], p["partition_index"]), p, committed)
                        for p in topic["partitions"]
                    ],
                }
                for topic in body["topics"]
            ],
        }

    def _list_offset(self, tp: TopicPartition, asked: dict[str, Any], committed: bool) -> dict[str, Any]:
        out = {"partition_index": tp.partition, "error_code": ErrorCode.NONE, "timestamp": -1, "offset": -1}
        out["leader_epoch"] = UNDEFINED
        try:
            partition = self.rm.hosted(tp)
            with partition.lock:
                leader_log = partition.require_leader()
                partition.check_leader_epoch(asked.get("current_leader_epoch", -1))
                timestamp = asked["timestamp"]
                hw = partition.high_watermark
                fetchable = leader_log.last_stable_offset(hw) if committed else hw
                if timestamp == LATEST:
                    out["offset"] = fetchable
                    out["leader_epoch"] = partition.leader_epoch
                elif timestamp == EARLIEST:
                    out["offset"] = leader_log.log_start_offset
                    out["leader_epoch"] = leader_log.epoch_for_offset(leader_log.log_start_offset)
                else:
                    found = leader_log.offset_for_timestamp(timestamp)
                    if found is not None and found[0] < fetchable:
                        out["offset"], out["timestamp"] = found
                        out["leader_epoch"] = leader_log.epoch_for_offset(found[0])
        except PartitionError as exc:
            out["error_code"] = exc.code
        return out

    def offset_for_leader_epoch(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "topic": topic["topic"],
                    "partitions": [
                        self._epoch_end(TopicPartition(topic["topic"], p["partition"]), p)
                        for p in topic["partitions"]
                    ],
                }
                for topic in body["topics"]
            ],
        }

    def _epoch_end(self, tp: TopicPartition, asked: dict[str, Any]) -> dict[str, Any]:
        out = {"error_code": ErrorCode.NONE, "partition": tp.partition, "leader_epoch": UNDEFINED}
        out["end_offset"] = UNDEFINED
        try:
            partition = self.rm.hosted(tp)
            with partition.lock:
                leader_log = partition.require_leader()
                partition.check_leader_epoch(asked.get("current_leader_epoch", -1))
                out["leader_epoch"], out["end_offset"] = leader_log.end_offset_for_epoch(
                    asked["leader_epoch"]
                )
        except PartitionError as exc:
            out["error_code"] = exc.code
        return out
