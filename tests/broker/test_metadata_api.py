"""Metadata answers from the cache, encoded topic by topic with a checkpoint between topics.

Each test decodes the response bytes a client would receive.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, cast

import pytest

from broker.metadata_api import MetadataApis
from broker.metadata_cache import MetadataCache
from broker.request_channel import Request, Result
from protocol import (
    ApiKey,
    ErrorCode,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from tests.support.requests import um_partition, update_metadata

BROKER_ID = 1
LISTENER = "PLAINTEXT"


def update(
    cache: MetadataCache, topics: dict[str, list[dict[str, Any]]], brokers: tuple[int, ...] = (1, 2)
) -> None:
    cache.update(update_metadata(7, 1, topics, live=brokers))


class Client:
    """Sends Metadata requests through the handler and the response codec, as the broker does."""

    def __init__(self) -> None:
        self.cache = MetadataCache()
        self.apis = MetadataApis(
            BROKER_ID,
            self.cache,
            lambda: {LISTENER: ("localhost", 9092)},
            lambda: "cluster",
            lambda: (ApiKey.METADATA,),
        )

    def raw(
        self, version: int, topics: list[str] | None = None, describable: Callable[[str], bool] | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"topics": None if topics is None else [{"name": t} for t in topics]}
        if version >= 4:
            body["allow_auto_topic_creation"] = False
        if version >= 8:
            body["include_cluster_authorized_operations"] = False
            body["include_topic_authorized_operations"] = False
        frame = encode_request(ApiKey.METADATA, version, 7, "test", body)
        header, offset = decode_request_header(frame)
        future = cast("asyncio.Future[Result]", None)
        request = Request(header, frame, offset, LISTENER, "127.0.0.1:1", time.monotonic(), future)
        request.describable = describable
        return self.apis.metadata(request, body)

    def metadata(
        self, version: int, topics: list[str] | None = None, describable: Callable[[str], bool] | None = None
    ) -> dict[str, Any]:
        response = self.raw(version, topics, describable)
        correlation_id, decoded = decode_response(
            ApiKey.METADATA, version, encode_response(ApiKey.METADATA, version, 7, response)
        )
        assert correlation_id == 7
        return decoded

    def leaders(self, version: int = 1) -> dict[tuple[str, int], tuple[int, int]]:
        """(topic, partition) -> (leader, error code)."""
        return {
            (t["name"], p["partition_index"]): (p["leader_id"], p["error_code"])
            for t in self.metadata(version)["topics"]
            for p in t["partitions"]
        }


@pytest.mark.parametrize("version", range(1, 9))
def test_every_version_describes_the_cache(version: int) -> None:
    client = Client()
    update(
        client.cache,
        {
            "a": [um_partition(0, leader=1, leader_epoch=4), um_partition(1, leader=2, leader_epoch=6)],
            "b": [um_partition(0, leader=2, leader_epoch=3, replicas=(2, 1))],
        },
    )
    response = client.metadata(version)
    assert [b["node_id"] for b in response["brokers"]] == [1, 2]
    topics = {t["name"]: t for t in response["topics"]}
    assert sorted(topics) == ["a", "b"]
    partitions = {p["partition_index"]: p for p in topics["a"]["partitions"]}
    assert partitions[1]["leader_id"] == 2 and partitions[1]["replica_nodes"] == [1, 2]
    if version >= 7:
        assert partitions[1]["leader_epoch"] == 6
    if version >= 8:
        assert topics["b"]["topic_authorized_operations"] == -(2**31)


def test_a_leader_change_is_served_at_once() -> None:
    client = Client()
    update(client.cache, {"a": [um_partition(0, leader=1)], "b": [um_partition(0, leader=2)]})
    assert client.leaders() == {("a", 0): (1, ErrorCode.NONE), ("b", 0): (2, ErrorCode.NONE)}
    update(client.cache, {"a": [um_partition(0, leader=2, leader_epoch=2)]})
    assert client.leaders() == {("a", 0): (2, ErrorCode.NONE), ("b", 0): (2, ErrorCode.NONE)}


def test_every_topic_passes_a_checkpoint() -> None:
    client = Client()
    update(
        client.cache,
        {
            "a": [um_partition(0, leader=1)],
            "b": [um_partition(0, leader=2)],
            "c": [um_partition(0, leader=1)],
        },
    )
    calls: list[int] = []
    client.apis.checkpoint = lambda: calls.append(1)
    client.metadata(1)
    assert len(calls) == 3


def test_a_broker_leaving_is_seen_in_topics_it_did_not_touch() -> None:
    client = Client()
    update(client.cache, {"a": [um_partition(0, leader=2)]})
    assert client.leaders() == {("a", 0): (2, ErrorCode.NONE)}
    update(client.cache, {}, brokers=(1,))  # broker 2 is gone; topic a's state itself is unchanged
    assert client.leaders() == {("a", 0): (-1, ErrorCode.LEADER_NOT_AVAILABLE)}


def test_unknown_and_deleted_topics_are_not_served_from_old_encodings() -> None:
    client = Client()
    update(client.cache, {"a": [um_partition(0, leader=1)]})
    unknown = client.metadata(1, ["a", "nope"])["topics"][1]
    assert unknown["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    update(client.cache, {"a": [um_partition(0, leader=-2)]})  # deletion removes the partition
    (topic,) = client.metadata(1, ["a"])["topics"]
    assert topic["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and topic["partitions"] == []


def test_the_controller_id_clients_see_is_a_live_broker_unless_the_controller_is_listed() -> None:
    from broker.metadata_api import admin_node
    from broker.metadata_cache import CachedBroker, Snapshot

    brokers = {b: CachedBroker(b, {"PLAINTEXT": ("127.0.0.1", 9000 + b)}) for b in (3, 2, 5)}
    assert admin_node(Snapshot(controller_id=100, brokers=brokers), own_id=5) == 2
    assert admin_node(Snapshot(controller_id=100), own_id=5) == 5  # cold cache: itself
    # On Kafka 3.9's wire the controller lists itself among the live brokers and serves admin requests
    listed = {**brokers, 1001: CachedBroker(1001, {"PLAINTEXT": ("127.0.0.1", 9999)})}
    assert admin_node(Snapshot(controller_id=1001, brokers=listed), own_id=5) == 1001


def test_all_topics_lists_only_what_the_principal_may_describe() -> None:
    """The authorizer's filter reaches the handler: the topics are encoded as they are built, so a
    filter applied to the finished answer would find bytes, not topics (a real client's Metadata for
    all topics once closed its connection on an ACL-enabled broker)."""
    client = Client()
    update(client.cache, {"public": [um_partition(0, leader=1)], "secret": [um_partition(0, leader=2)]})
    for version in (1, 4, 8):
        listed = client.metadata(version, describable=lambda name: name != "secret")["topics"]
        assert [t["name"] for t in listed] == ["public"]
        assert [t["name"] for t in client.metadata(version)["topics"]] == ["public", "secret"]
