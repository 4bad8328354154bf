"""Kafka's VerifiableProducer and VerifiableConsumer lines as history events (``chaos.verifiable_events``),
malformed lines logged and skipped (``chaos.java_tool``), and a missing jar refused with exit 2.

No JVM and no cluster: the lines are those the 4.4 tools print, written out by hand."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from chaos import java_tool
from chaos.__main__ import main
from chaos.java_tool import JavaTool, ToolsMissing
from chaos.verifiable import PRODUCER_MAIN, KafkaProducerWorkload, value_prefix
from chaos.verifiable_events import (
    MalformedLine,
    ProducerView,
    consumer_events,
    parse,
    producer_event,
    sent_count,
    startup_ms,
    unreported,
)
from daemon.eventlog import EventLog
from kafkapeer.jars import JarsMissing
from tests.chaos.test_run import FIELDS

VIEW = ProducerView("chaos", "all", idempotent=True, rate=100, prefix=1795716936)
STARTED = 1795716938000
"""The producer's ``startup_complete``: record n is due n * 10 ms later at 100 records/s."""


def success(n: int, at: int, partition: int = 4, offset: int = 17) -> dict[str, Any]:
    return {
        "timestamp": at,
        "name": "producer_send_success",
        "key": "3",
        "value": f"1795716936.{n}",
        "offset": offset,
        "topic": "chaos",
        "partition": partition,
    }


def test_an_acknowledged_send_is_produce_acked_with_the_latency_from_its_due_time() -> None:
    kind, fields = producer_event(success(50, STARTED + 520), VIEW, STARTED) or ("", {})
    assert kind == "produce_acked"
    assert fields == {
        "topic": "chaos",
        "acks": "all",
        "idempotent": True,
        "partition": 4,
        "offset": 17,
        "value": "1795716936.50",
        "latency_ms": 20.0,
    }
    assert set(fields) == FIELDS["produce_acked"]
    # a tool ahead of its pace never gives a negative latency; without its start, none is known
    assert producer_event(success(50, STARTED + 400), VIEW, STARTED) == (
        "produce_acked",
        fields | {"latency_ms": 0.0},
    )
    assert producer_event(success(50, STARTED + 520), VIEW, None) == (
        "produce_acked",
        fields | {"latency_ms": None},
    )


def test_a_failed_send_is_produce_failed_named_by_its_exception_class() -> None:
    line = {
        "timestamp": STARTED + 3000,
        "name": "producer_send_error",
        "topic": "chaos",
        "key": None,
        "value": "1795716936.172",
        "exception": "class org.apache.kafka.common.errors.NetworkException",
        "message": "Disconnected from node 1",
    }
    kind, fields = producer_event(line, VIEW, STARTED) or ("", {})
    assert (kind, fields) == (
        "produce_failed",
        {
            "topic": "chaos",
            "acks": "all",
            "partition": None,
            "value": "1795716936.172",
            "error": "NetworkException",
            "latency_ms": 1280.0,
        },
    )
    assert set(fields) == FIELDS["produce_failed"]


def test_the_producers_own_lines_are_bookkeeping_not_events() -> None:
    startup = parse('{"timestamp":1795716938000,"name":"startup_complete"}')
    tool_data = parse(
        '{"timestamp":1795716953695,"name":"tool_data","sent":761,"acked":760,'
        '"target_throughput":50,"avg_throughput":49.97}'
    )
    shutdown = parse('{"timestamp":1795716953694,"name":"shutdown_complete"}')
    assert [producer_event(x, VIEW, STARTED) for x in (startup, tool_data, shutdown)] == [None] * 3
    assert (startup_ms(startup), startup_ms(tool_data)) == (STARTED, None)
    assert (sent_count(tool_data), sent_count(startup)) == (761, None)


def test_values_carry_the_runs_prefix_and_the_unreported_ones_are_found() -> None:
    acks1 = ProducerView("chaos-acks1", "1", idempotent=False, rate=50, prefix=-1795716936)
    assert VIEW.number("1795716936.42") == 42 and acks1.number("-1795716936.42") == 42
    # another run's value, the other topic's, or something else entirely is none of this producer's
    assert [VIEW.number(v) for v in ("1795716937.42", "-1795716936.42", "42", "1795716936.x")] == [None] * 4
    assert unreported(VIEW, 5, {0, 1, 3}) == ["1795716936.2", "1795716936.4"]
    assert value_prefix("run-20261126T181536Z") == 1795716936
    assert 0 <= value_prefix("my-run") < 2**31  # any other id still gets a Java int


def test_the_producers_run_paced_at_their_acks_and_only_the_acks_all_one_idempotent(tmp_path: Path) -> None:
    history = EventLog(None, "workload")
    acks1 = ProducerView("chaos-acks1", "1", idempotent=False, rate=50, prefix=-1795716936)
    commands = {}
    for view in (VIEW, acks1):
        tool = KafkaProducerWorkload(["java", "-cp", "jars"], "b:9092", view, history, tmp_path).tool
        commands[tool.name] = tool.command[tool.command.index(PRODUCER_MAIN) + 1 :]

    def option(tool: str, name: str) -> str:
        return commands[tool][commands[tool].index(name) + 1]

    assert option("verifiable-producer", "--acks") == "-1"
    assert option("verifiable-producer", "--throughput") == "100"
    assert "--value-prefix=1795716936" in commands["verifiable-producer"]
    assert option("verifiable-producer-acks1", "--acks") == "1"
    assert option("verifiable-producer-acks1", "--throughput") == "50"
    assert "--value-prefix=-1795716936" in commands["verifiable-producer-acks1"]
    # VerifiableProducer sets retries=0, which silently turns idempotence off unless both are set back
    config = (tmp_path / "verifiable-producer.properties").read_text().splitlines()
    assert {"enable.idempotence=true", "retries=2147483647", "delivery.timeout.ms=30000"} <= set(config)
    config = (tmp_path / "verifiable-producer-acks1.properties").read_text().splitlines()
    assert "enable.idempotence=false" in config and not any(c.startswith("retries") for c in config)


def test_consumer_lines_become_the_groups_events() -> None:
    def events(text: str) -> list[tuple[str, dict[str, Any]]]:
        return consumer_events(parse(text), "member-1", "chaos-run")

    assigned = events(
        '{"timestamp":1,"name":"partitions_assigned","partitions":'
        '[{"topic":"chaos","partition":3},{"topic":"chaos","partition":2}]}'
    )
    assert assigned == [
        ("group_assigned", {"member": "member-1", "group": "chaos-run", "partitions": [2, 3]})
    ]
    revoked = events('{"timestamp":2,"name":"partitions_revoked","partitions":[]}')
    assert revoked == [("group_revoked", {"member": "member-1", "group": "chaos-run", "partitions": []})]
    record = events(
        '{"timestamp":3,"name":"record_data","key":"7","value":"1795716936.9",'
        '"topic":"chaos","partition":2,"offset":40}'
    )
    assert record == [
        (
            "group_consumed",
            {"member": "member-1", "topic": "chaos", "partition": 2, "offset": 40, "value": "1795716936.9"},
        )
    ]
    committed = events(
        '{"timestamp":4,"name":"offsets_committed","offsets":[{"topic":"chaos",'
        '"partition":2,"offset":41},{"topic":"chaos","partition":3,"offset":7}],"success":true}'
    )
    assert [(k, f["partition"], f["offset"]) for k, f in committed] == [
        ("group_committed", 2, 41),
        ("group_committed", 3, 7),
    ]
    failed = events(
        '{"timestamp":5,"name":"offsets_committed","offsets":[{"topic":"chaos","partition":2,'
        '"offset":41}],"error":"Commit cannot be completed since the group has already '
        'rebalanced","success":false}'
    )
    assert failed == [
        (
            "group_commit_failed",
            {
                "member": "member-1",
                "group": "chaos-run",
                "partition": None,
                "error": "Commit cannot be completed since the group has already rebalanced",
            },
        )
    ]
    for kind, fields in assigned + revoked + record + committed + failed:
        assert set(fields) == FIELDS[kind]
    summary = '{"timestamp":6,"name":"records_consumed","count":1,"partitions":[]}'
    assert events(summary) == events('{"timestamp":7,"name":"shutdown_complete"}') == []


@pytest.mark.parametrize(
    "text",
    [
        "Bad data can't be written as json: boom",
        "[1, 2]",
        '{"timestamp": 1}',
        '{"name": 7}',
        '{"timestamp":1,"name":"producer_send_succ',  # a torn last line
    ],
)
def test_a_line_that_is_not_the_tools_json_is_malformed(text: str) -> None:
    with pytest.raises(MalformedLine):
        parse(text)


@pytest.mark.parametrize(
    "line",
    [
        {"timestamp": 1, "name": "producer_send_success", "value": "1795716936.1", "topic": "chaos"},
        {
            "timestamp": 1,
            "name": "producer_send_success",
            "value": "1795716936.1",
            "topic": "chaos",
            "partition": True,
            "offset": 3,
        },
        {"timestamp": 1, "name": "producer_send_error", "value": None, "topic": "chaos", "exception": "x"},
        {
            "timestamp": "soon",
            "name": "producer_send_error",
            "value": "v",
            "topic": "chaos",
            "exception": "x",
        },
        {"name": "startup_complete"},
        {"name": "tool_data", "sent": "many"},
    ],
)
def test_a_producer_line_without_its_fields_is_malformed(line: dict[str, Any]) -> None:
    with pytest.raises(MalformedLine):
        startup_ms(line)
        sent_count(line)
        producer_event(line, VIEW, STARTED)


@pytest.mark.parametrize(
    "line",
    [
        {"name": "partitions_assigned", "partitions": [3]},
        {"name": "partitions_revoked"},
        {"name": "record_data", "topic": "chaos", "partition": 1, "offset": 2, "value": 5},
        {"name": "record_data", "topic": "chaos", "partition": 1, "value": "v"},
        {"name": "offsets_committed", "offsets": [{"topic": "chaos", "partition": 1}], "success": True},
        {"name": "offsets_committed", "offsets": ["chaos-1"], "success": True},
        {"name": "offsets_committed", "offsets": [], "success": "yes"},
    ],
)
def test_a_consumer_line_without_its_fields_is_malformed(line: dict[str, Any]) -> None:
    with pytest.raises(MalformedLine):
        consumer_events(line, "member-0", "g")


def test_malformed_or_unusable_lines_are_logged_and_skipped_and_the_rest_still_counts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[dict[str, Any]] = []

    def on_line(line: dict[str, Any]) -> None:
        if line["name"] == "explode":
            raise KeyError("a translation bug")
        seen.append(line)

    tool = JavaTool("verifiable-producer", ["unused"], tmp_path / "raw.jsonl", on_line)
    with caplog.at_level(logging.INFO, logger="chaos.kafka-tools"):
        for text in ("not json", '{"name":"explode"}', "", '{"name":"startup_complete","timestamp":1}'):
            tool._handle(text)
    assert seen == [{"name": "startup_complete", "timestamp": 1}] and tool.started.is_set()
    assert tool.skipped == 2
    assert [r.levelname for r in caplog.records] == ["WARNING", "ERROR"]
    assert "not JSON: 'not json'" in caplog.records[0].getMessage()


def test_a_tool_process_is_read_line_by_line_kept_raw_and_stopped_with_sigterm(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A stand-in for a tool: its JSON on stdout, a complaint on stderr, a last line from its SIGTERM hook.
    script = (
        "import json, signal, sys, time\n"
        "def bye(*_):\n"
        "    print(json.dumps({'name': 'tool_data', 'sent': 2}), flush=True)\n"
        "    sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('WARN something', file=sys.stderr, flush=True)\n"
        "print('half a line {', flush=True)\n"
        "print(json.dumps({'name': 'startup_complete', 'timestamp': 1}), flush=True)\n"
        "time.sleep(60)\n"
    )
    seen: list[str] = []
    raw = tmp_path / "tool.jsonl"
    tool = JavaTool("stand-in", [sys.executable, "-c", script], raw, lambda line: seen.append(line["name"]))
    with caplog.at_level(logging.INFO, logger="chaos.kafka-tools"):
        tool.start().wait_started(deadline=float("inf"))
        assert tool.exit_status() is None
        assert tool.stop(timeout_s=10) == 143
    assert seen == ["startup_complete", "tool_data"] and tool.skipped == 1
    assert tool.why() == "WARN something"
    assert raw.read_text().splitlines()[0] == "half a line {"
    assert json.loads(raw.read_text().splitlines()[-1]) == {"name": "tool_data", "sent": 2}
    assert "stand-in: WARN something" in caplog.text


def test_a_missing_jar_or_java_is_exit_2_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unresolved(_: object) -> str:
        raise JarsMissing("clients-4.4.0 is not resolved: run `make kafka` (python -m kafkapeer resolve)")

    monkeypatch.setattr(java_tool, "classpath", unresolved)
    assert main(["run", "--dir", str(tmp_path), "--workload", "kafka-verifiable"]) == 2
    err = capsys.readouterr().err
    assert (
        err == "error: Kafka's tools are missing: clients-4.4.0 is not resolved: run `make kafka` "
        "(python -m kafkapeer resolve)\n"
    )
    monkeypatch.setattr(java_tool.shutil, "which", lambda _: None)
    with pytest.raises(ToolsMissing, match="java not found"):
        java_tool.java_prefix()
    assert main(["run", "--dir", str(tmp_path), "--workload", "kafka-verifiable", "--start"]) == 2
    assert not (tmp_path / "cluster.json").exists(), "no cluster started for a run that cannot be"
