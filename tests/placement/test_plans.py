"""Reassignment plans in Kafka's JSON, read strictly: pure rules, no ZooKeeper."""

from __future__ import annotations

import json

import pytest

from placement.errors import AdminError
from placement.plans import parse_reassignment_plan
from zkstore.znodes import TopicPartition


def test_plan_is_read_strictly() -> None:
    good = (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}'
    )
    assert parse_reassignment_plan(good, TopicPartition) == {TopicPartition("t", 0): (1, 2)}
    twice = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}] * 2}

    def entry(partition: object, replicas: object) -> str:
        return json.dumps({"partitions": [{"topic": "t", "partition": partition, "replicas": replicas}]})

    bad = {
        "not JSON": "{",
        "Not supported version": json.dumps({"version": 2, "partitions": []}),
        "cannot be empty": json.dumps({"version": 1, "partitions": []}),
        "duplicate topic partitions: t-0": json.dumps(twice),
        "'partition' must be a non-negative integer": entry(-1, []),
        "'replicas' must be a non-negative integer": entry(0, [True]),
        "log directories": '{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d"]}]}',
    }
    for reason, text in bad.items():
        with pytest.raises(AdminError, match=reason):
            parse_reassignment_plan(text, TopicPartition)
