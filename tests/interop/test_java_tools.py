"""Kafka's command-line tools, 3.9 and 4.4, run from the jars by their main classes against our cluster.

Per version, one PLAINTEXT cluster takes every tool: a batch in one JVM (``programs/ToolRunner.java``,
as Kafka's own tool tests run them: topics, configs, reassignment, leader election, log dirs, console
producer and consumer, consumer groups, the perf tests) beside the verifiable producer and consumer,
which need a JVM each. The tests below each assert on one tool's runs, read from that shared outcome, so
the cluster is started once per version; ``kafka-acls`` runs on the secured layout
(``test_java_secured.py``). What a tool cannot do here is a strict xfail naming the gap (docs/broker.md,
docs/interop.md).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.interop.java import VERSION_IDS, JavaRun, JavaSide, Shared, ToolRun
from tests.support.cluster import Cluster
from tests.support.zookeeper import topic_replicas

pytestmark = pytest.mark.zookeeper

BROKERS = (1, 2, 3)
SETTINGS = {"offsets_topic_num_partitions": 6, "group_initial_rebalance_delay_ms": 0}
MOVES = {0: [2, 3], 1: [3, 2]}
"""tools-b starts on 1,2 and 2,3: partition 0 moves, partition 1 only changes its preferred leader."""
TOPICS = {
    "tools-b": {0: (1, 2), 1: (2, 3)},
    "tools-console": {0: (1, 2), 1: (2, 3), 2: (3, 1)},
    "tools-verifiable": {0: (1, 2, 3), 1: (2, 3, 1)},
    "tools-perf": {0: (3, 1), 1: (1, 2)},
}
LINES = [f"k{i}:v{i}" for i in range(20)]
VERIFIABLE = 200
PERF = 2000

RUNS = Shared[dict[str, Any]]()
"""Per version: every tool run by name, and ``zookeeper`` (tools-b's assignment after them)."""


def topic_and_config_runs(server: str) -> list[ToolRun]:
    topic = f"{server} --entity-type topics --entity-name tools-a"
    broker = f"{server} --entity-type brokers --entity-name 1"
    a, c = "--topic tools-a", "--topic tools-c"
    return [
        ToolRun.of(
            "create",
            "kafka-topics",
            f"{server} --create {a} --partitions 3 --replication-factor 2 --config retention.ms=3600000",
        ),
        ToolRun.of(
            "create_c", "kafka-topics", f"{server} --create {c} --partitions 1 --replication-factor 1"
        ),
        ToolRun.of("grow", "kafka-topics", f"{server} --alter {a} --partitions 4"),
        ToolRun.of("delete", "kafka-topics", f"{server} --delete {c}"),
        # the broker asked may learn of the deletion and the new partition after the one that answered:
        # these ask until it has, as a user would
        ToolRun.of(
            "list", "kafka-topics", f"{server} --list", until=r"(?m)\A(?![\s\S]*^tools-c$)[\s\S]*^tools-a$"
        ),
        ToolRun.of("describe", "kafka-topics", f"{server} --describe {a}", until="PartitionCount: 4"),
        ToolRun.of(
            "configs_alter",
            "kafka-configs",
            f"{topic} --alter --add-config max.message.bytes=200000 --delete-config retention.ms",
        ),
        ToolRun.of("configs_describe", "kafka-configs", f"{topic} --describe"),
        ToolRun.of("configs_broker", "kafka-configs", f"{broker} --describe --all"),
        ToolRun.of(
            "configs_broker_alter", "kafka-configs", f"{broker} --alter --add-config log.cleaner.threads=2"
        ),
    ]


def reassignment_runs(server: str) -> list[ToolRun]:
    reassign, plan = "kafka-reassign-partitions", "--reassignment-json-file plan.json"
    completed = "".join(rf"(?=[\s\S]*tools-b-{p} is completed)" for p in MOVES)
    return [
        ToolRun.of(
            "generate",
            reassign,
            f"{server} --generate --topics-to-move-json-file move.json --broker-list 1,2,3",
        ),
        ToolRun.of("execute", reassign, f"{server} --execute {plan}"),
        # also clears the replication throttles of each broker, here deletions of configs never set
        ToolRun.of("verify", reassign, f"{server} --verify {plan}", until=completed),
        ToolRun.of("list_reassignments", reassign, f"{server} --list"),
        ToolRun.of(
            "election",
            "kafka-leader-election",
            f"{server} --election-type preferred --topic tools-b --partition 1",
        ),
        # once broker 1 deleted its replica of tools-b-0, which the controller's StopReplica asked for
        ToolRun.of(
            "log_dirs",
            "kafka-log-dirs",
            f"{server} --describe --topic-list tools-b",
            until=r'"broker":1,"logDirs":\[\{"partitions":\[\]',
        ),
        ToolRun.of("throttled", reassign, f"{server} --execute {plan} --throttle 10000000"),
    ]


def console_and_group_runs(server: str, before_4: bool) -> list[ToolRun]:
    # 4.x renamed --property: --reader-property for the producer, --formatter-property for the consumer
    reader, formatter = (
        ("--property", "--property") if before_4 else ("--reader-property", "--formatter-property")
    )
    topic, group = "--topic tools-console", f"{server} --group console-group"
    lines = "".join(f"{line}\n" for line in LINES)
    groups = "kafka-consumer-groups"
    return [
        ToolRun.of(
            "produce",
            "kafka-console-producer",
            f"{server} {topic} {reader} parse.key=true {reader} key.separator=:",
            stdin=lines,
        ),
        ToolRun.of(
            "consume",
            "kafka-console-consumer",
            f"{group} {topic} --from-beginning "
            f"--max-messages {len(LINES)} --timeout-ms 30000 {formatter} print.key=true "
            f"{formatter} key.separator=:",
        ),
        ToolRun.of("groups_list", groups, f"{server} --list"),
        ToolRun.of("groups_describe", groups, f"{group} --describe"),
        ToolRun.of("groups_reset", groups, f"{group} --reset-offsets {topic} --to-earliest --execute"),
        ToolRun.of("groups_described_after_reset", groups, f"{group} --describe"),
        ToolRun.of("groups_delete_offsets", groups, f"{group} --delete-offsets {topic}"),
        ToolRun.of("groups_delete", groups, f"{group} --delete"),
        ToolRun.of("groups_listed_after_delete", groups, f"{server} --list"),
    ]


def perf_runs(server: str, before_4: bool) -> list[ToolRun]:
    # 4.x renamed --producer-props to --command-property and --messages to --num-records
    props, messages = (
        ("--producer-props", "--messages") if before_4 else ("--command-property", "--num-records")
    )
    bootstrap = server.split()[1]
    return [
        ToolRun.of(
            "producer_perf",
            "kafka-producer-perf-test",
            f"--topic tools-perf --num-records {PERF} "
            f"--record-size 100 --throughput -1 {props} bootstrap.servers={bootstrap}",
        ),
        ToolRun.of(
            "consumer_perf", "kafka-consumer-perf-test", f"{server} --topic tools-perf {messages} {PERF}"
        ),
    ]


async def verifiable_runs(java: JavaSide) -> dict[str, JavaRun]:
    """The verifiable tools, each its own JVM: they print their last events from JVM shutdown hooks."""
    server, topic = f"--bootstrap-server {java.bootstrap}", "--topic tools-verifiable"
    produce = f"{server} {topic} --max-messages {VERIFIABLE}"
    consume = f"{server} {topic} --group-id verifiable --max-messages {VERIFIABLE} --reset-policy earliest"
    return {
        "verifiable_producer": await java.tool("kafka-verifiable-producer", *produce.split()),
        "verifiable_consumer": await java.tool("kafka-verifiable-consumer", *consume.split()),
    }


async def tool_runs(cluster: Cluster, tmp_path: Path, version: str) -> dict[str, Any]:
    """Every tool's runs on one cluster: a batch in one JVM beside the two verifiable tools' JVMs."""

    async def scenario() -> dict[str, Any]:
        await cluster.start(BROKERS, overrides=dict.fromkeys(BROKERS, SETTINGS))
        for topic, replicas in TOPICS.items():
            await cluster.topic(topic, replicas)
        java = JavaSide(version, cluster, tmp_path)
        plan = [{"topic": "tools-b", "partition": p, "replicas": r} for p, r in MOVES.items()]
        (java.dir / "plan.json").write_text(json.dumps({"version": 1, "partitions": plan}))
        (java.dir / "move.json").write_text(json.dumps({"version": 1, "topics": [{"topic": "tools-b"}]}))
        server = f"--bootstrap-server {java.bootstrap}"
        batch = [
            *topic_and_config_runs(server),
            *reassignment_runs(server),
            *console_and_group_runs(server, java.before_4),
            *perf_runs(server, java.before_4),
        ]
        runs, verifiable = await asyncio.gather(java.tools(batch), verifiable_runs(java))
        return {**runs, **verifiable, "zookeeper": await topic_replicas(cluster.admin, "tools-b")}

    return await RUNS.get(version, scenario)


def described(output: str, group: str, topic: str) -> dict[int, tuple[str, str, str]]:
    """consumer-groups --describe's rows of ``group`` and ``topic``: partition -> (current offset,
    log end offset, lag), read as tokens (3.9's tool leaves out some line ends)."""
    rows = re.findall(rf"{group}\s+{topic}\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)", output)
    return {int(p): (current, end, lag) for p, current, end, lag in rows}


def reset(output: str, group: str, topic: str) -> dict[int, int]:
    """consumer-groups --reset-offsets' rows: partition -> new offset."""
    return {int(p): int(o) for p, o in re.findall(rf"{group}\s+{topic}\s+(\d+)\s+(\d+)", output)}


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_kafka_topics(cluster: Cluster, tmp_path: Path, version: str) -> None:
    runs = await tool_runs(cluster, tmp_path, version)
    assert "Created topic tools-a." in runs["create"].succeeded()
    runs["create_c"].succeeded()
    runs["grow"].succeeded()
    runs["delete"].succeeded()
    listed = runs["list"].succeeded().split()
    assert "tools-a" in listed and "tools-c" not in listed
    described = runs["describe"].succeeded()
    assert re.search(r"PartitionCount: 4\s+ReplicationFactor: 2\s+Configs: retention.ms=3600000", described)
    partitions = re.findall(
        r"Partition: (\d+)\s+Leader: (\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]+)", described
    )
    assert sorted(int(p) for p, *_ in partitions) == [0, 1, 2, 3]
    assert all(
        leader == replicas.split(",")[0] and len(isr.split(",")) == 2
        for _, leader, replicas, isr in partitions
    )


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_kafka_configs(cluster: Cluster, tmp_path: Path, version: str) -> None:
    runs = await tool_runs(cluster, tmp_path, version)
    assert "Completed updating config for topic tools-a." in runs["configs_alter"].succeeded()
    described = runs["configs_describe"].succeeded()
    assert (
        "max.message.bytes=200000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:max.message.bytes=200000"
        in described
    )
    assert "retention.ms" not in described
    assert "broker.id=1 sensitive=false" in runs["configs_broker"].succeeded()


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_kafka_reassign_partitions_and_leader_election(
    cluster: Cluster, tmp_path: Path, version: str
) -> None:
    runs = await tool_runs(cluster, tmp_path, version)
    assert "Proposed partition reassignment configuration" in runs["generate"].succeeded()
    assert (
        "Successfully started partition reassignments for tools-b-0,tools-b-1" in runs["execute"].succeeded()
    )
    verified = runs["verify"].succeeded()
    assert all(f"Reassignment of partition tools-b-{p} is completed." in verified for p in MOVES)
    assert "No partition reassignments found." in runs["list_reassignments"].succeeded()
    assert runs["zookeeper"] == {p: tuple(r) for p, r in MOVES.items()}
    assert (
        "Successfully completed leader election (PREFERRED) for partitions tools-b-1"
        in runs["election"].succeeded()
    )


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_kafka_log_dirs(cluster: Cluster, tmp_path: Path, version: str) -> None:
    runs = await tool_runs(cluster, tmp_path, version)
    (line,) = [x for x in runs["log_dirs"].succeeded().splitlines() if x.startswith("{")]
    found = {
        b["broker"]: sorted(p["partition"] for d in b["logDirs"] for p in d["partitions"])
        for b in json.loads(line)["brokers"]
    }
    assert found == {1: [], 2: ["tools-b-0", "tools-b-1"], 3: ["tools-b-0", "tools-b-1"]}


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_kafka_console_producer_and_consumer(cluster: Cluster, tmp_path: Path, version: str) -> None:
    runs = await tool_runs(cluster, tmp_path, version)
    runs["produce"].succeeded()
    assert sorted(runs["consume"].succeeded().split()) == sorted(LINES)
    assert f"Processed a total of {len(LINES)} messages" in runs["consume"].stderr


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_kafka_consumer_groups(cluster: Cluster, tmp_path: Path, version: str) -> None:
    runs = await tool_runs(cluster, tmp_path, version)
    assert "console-group" in runs["groups_list"].succeeded().split()
    before = described(runs["groups_describe"].succeeded(), "console-group", "tools-console")
    assert sorted(before) == [0, 1, 2]
    assert sum(int(current) for current, _, _ in before.values()) == len(LINES)
    assert all(current == end and lag == "0" for current, end, lag in before.values())
    assert reset(runs["groups_reset"].succeeded(), "console-group", "tools-console") == {0: 0, 1: 0, 2: 0}
    after = described(runs["groups_described_after_reset"].succeeded(), "console-group", "tools-console")
    assert {p: (current, lag) for p, (current, end, lag) in after.items()} == {
        p: ("0", end) for p, (_, end, _) in before.items()
    }
    deleted = runs["groups_delete"].succeeded()
    assert "Deletion of requested consumer groups ('console-group') was successful." in deleted
    assert "console-group" not in runs["groups_listed_after_delete"].succeeded().split()


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_kafka_verifiable_producer_and_consumer(cluster: Cluster, tmp_path: Path, version: str) -> None:
    runs = await tool_runs(cluster, tmp_path, version)
    produced = runs["verifiable_producer"].ok().events()
    sent = [e for e in produced if e["name"] == "producer_send_success"]
    assert len(sent) == VERIFIABLE and len({(e["partition"], e["offset"]) for e in sent}) == VERIFIABLE
    assert produced[-1]["name"] == "tool_data" and produced[-1]["acked"] == VERIFIABLE
    consumed = runs["verifiable_consumer"].ok().events()
    assert sum(e["count"] for e in consumed if e["name"] == "records_consumed") == VERIFIABLE
    ends: dict[tuple[str, int], int] = {}
    for e in sent:
        ends[e["topic"], e["partition"]] = max(ends.get((e["topic"], e["partition"]), 0), e["offset"] + 1)
    commits = [e for e in consumed if e["name"] == "offsets_committed"]
    assert commits and all(e["success"] for e in commits)
    assert {(o["topic"], o["partition"]): o["offset"] for e in commits for o in e["offsets"]} == ends


@pytest.mark.parametrize("version", VERSION_IDS)
async def test_kafka_producer_and_consumer_perf_tests(cluster: Cluster, tmp_path: Path, version: str) -> None:
    runs = await tool_runs(cluster, tmp_path, version)
    assert re.search(rf"^{PERF} records sent, ", runs["producer_perf"].succeeded(), re.M)
    header, values = runs["consumer_perf"].succeeded().strip().splitlines()[-2:]
    assert dict(zip(header.split(", "), values.split(", "), strict=True))["data.consumed.in.nMsg"] == str(
        PERF
    )


TOOL_GAPS = {
    "groups_delete_offsets": (
        "OffsetDelete (API 47) is not served",
        "UnsupportedVersionException: The node does not support OFFSET_DELETE",
    ),
    "configs_broker_alter": (
        "dynamic broker configs are not implemented",
        "InvalidRequestException: broker configs are static here",
    ),
    "throttled": (
        "replication throttles are dynamic broker configs, not implemented",
        "InvalidRequestException: broker configs are static here",
    ),
}
"""Each tool run that meets a gap: the gap, and what the tool prints for it."""


@pytest.mark.parametrize("version", VERSION_IDS)
@pytest.mark.parametrize(
    "run",
    [
        pytest.param(run, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"gap: {gap}"))
        for run, (gap, _) in TOOL_GAPS.items()
    ],
)
async def test_tool_gap(cluster: Cluster, tmp_path: Path, version: str, run: str) -> None:
    """An xfail while the tool fails with the listed error; another failure, or success, fails."""
    result = (await tool_runs(cluster, tmp_path, version))[run]
    failed = result.returncode != 0 or "Error" in result.stdout
    if failed and TOOL_GAPS[run][1] not in result.stdout + result.stderr:
        pytest.fail(f"{run} fails otherwise than the listed gap:\n{result.describe()}")
    result.succeeded()
