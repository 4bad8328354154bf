"""The transactional checks over chaos run histories (``pipeline.transactions``): a clean transactional
workload passes all three, a run without one is skipped, and each violation planted fails its check
with the transaction or input it concerns as the example."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from pipeline.__main__ import main
from pipeline.report import render
from pipeline.transactions import (
    NO_LOOP,
    NO_TRANSACTIONS,
    PAST_UNTRANSFORMED,
    TRANSFORMED_ABOVE,
    eos_exactly_once,
    txn_durability,
    txn_isolation,
)
from tests.pipeline.conftest import RUN, ClusterLog, chaos_run, transactional_workload

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipeline.load import Logs
    from pipeline.result import CheckResult

Read = Callable[[ClusterLog], "Logs"]
TXN_ID = f"chaos-{RUN}-txn"
TXN_CHECKS = ("txn_isolation", "txn_durability", "eos_exactly_once")


def judged(logs: Logs) -> dict[str, CheckResult]:
    return {
        c.name: c
        for c in (
            txn_isolation(logs.history, logs.events),
            txn_durability(logs.history, logs.events),
            eos_exactly_once(logs.history, logs.events),
        )
    }


def planted(log: ClusterLog, **workload: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A finished chaos run with a transactional workload changed as ``workload`` says: (acknowledged
    inputs, ``txn_ended`` lines)."""
    acked = chaos_run(log)
    return acked, transactional_workload(log, acked, **workload)


def test_a_clean_transactional_workload_passes_all_three(cluster_log: ClusterLog, read: Read) -> None:
    chaos_run(cluster_log, transactions=True)
    checks = judged(read(cluster_log))
    assert {name: (c.verdict, c.checked, c.violations) for name, c in checks.items()} == {
        "txn_isolation": ("passed", 4, 0),
        "txn_durability": ("passed", 3, 0),
        "eos_exactly_once": ("passed", 6, 0),
    }
    assert checks["txn_isolation"].details == {
        "runs": [RUN],
        "outcomes": {"committed": 2, "aborted": 1, "unknown": 1},
    }
    assert checks["eos_exactly_once"].details == {"runs": [RUN], "transactions": 1}


def test_runs_without_transactions_are_skipped_with_the_reason(cluster_log: ClusterLog, read: Read) -> None:
    chaos_run(cluster_log)
    checks = judged(read(cluster_log))
    assert {name: c.verdict for name, c in checks.items()} == dict.fromkeys(checks, "skipped")
    assert checks["txn_isolation"].details == {"skipped": NO_TRANSACTIONS}
    assert checks["txn_durability"].details == {"skipped": NO_TRANSACTIONS}
    assert checks["eos_exactly_once"].details == {"skipped": NO_LOOP}


def test_a_run_without_its_final_read_is_not_judged(cluster_log: ClusterLog, read: Read) -> None:
    cluster_log.chaos("run_started", run_id=RUN, topic="chaos", partitions=2, faults=["kill"])
    acked = [
        cluster_log.workload("produce_acked", topic="chaos", partition=0, offset=0, value="v", latency_ms=1.0)
    ]
    # the workload's lines, an aborted value visible and an input transformed twice, but no run_finished
    transactional_workload(cluster_log, acked)
    cluster_log.workload("txn_consumed", topic="chaos-txn", isolation="read_committed", partition=0,
                         offset=9, value=f"{RUN}-t00001-0")  # fmt: skip
    cluster_log.workload("txn_consumed", topic="chaos-eos", isolation="read_committed", partition=0,
                         offset=9, value="eos:v")  # fmt: skip
    for check in judged(read(cluster_log)).values():
        assert check.verdict == "skipped", check
        assert check.details == {
            "skipped": "no run reached its final read",
            "runs": [RUN],
            "incomplete_runs": [RUN],
        }


def test_an_aborted_transaction_visible_to_read_committed_fails_isolation(
    cluster_log: ClusterLog, read: Read
) -> None:
    _, ended = planted(cluster_log)
    aborted = ended[1]
    cluster_log.workload("txn_consumed", topic="chaos-txn", isolation="read_committed", partition=1,
                         offset=0, value=aborted["values"][0])  # fmt: skip
    checks = judged(read(cluster_log))
    isolation = checks["txn_isolation"]
    assert (isolation.verdict, isolation.violations) == ("failed", 1)
    assert isolation.examples == [
        {
            "ts": aborted["ts"],
            "run": RUN,
            "rule": "aborted transaction visible to read_committed",
            "transactional_id": TXN_ID,
            "txn": 1,
            "outcome": "aborted",
            "values": aborted["values"],
            "visible": aborted["values"][:1],
        }
    ]
    assert checks["txn_durability"].verdict == checks["eos_exactly_once"].verdict == "passed"


def test_transactions_visible_in_part_fail_isolation(cluster_log: ClusterLog, read: Read) -> None:
    """A committed transaction read_committed saw in part, one it did not see at all, and one of unknown
    outcome seen in part: each is one violation, in time order."""
    committed, unknown = f"{RUN}-t00000-1", f"{RUN}-t00003-0"
    single = f"{RUN}-t00002-0"
    unread = {("read_committed", v) for v in (committed, unknown, single)}
    _, ended = planted(cluster_log, unread=frozenset(unread))
    checks = judged(read(cluster_log))
    isolation = checks["txn_isolation"]
    assert (isolation.verdict, isolation.checked, isolation.violations) == ("failed", 4, 3)
    rows = [(e["ts"], e["txn"], e["rule"], e.get("missing"), e.get("visible")) for e in isolation.examples]
    assert rows == [
        (ended[0]["ts"], 0, "committed transaction visible in part", [committed], None),
        (ended[2]["ts"], 2, "committed transaction not visible", [single], None),
        (ended[3]["ts"], 3, "transaction visible in part", None, [f"{RUN}-t00003-1"]),
    ]
    assert isolation.examples[2]["outcome"] == "unknown"
    assert checks["txn_durability"].verdict == "passed", "the read_uncommitted read-back has them all"


def test_a_committed_value_missing_from_read_uncommitted_fails_durability(
    cluster_log: ClusterLog, read: Read
) -> None:
    lost = f"{RUN}-t00002-0"
    _, ended = planted(cluster_log, unread=frozenset({("read_uncommitted", lost)}))
    checks = judged(read(cluster_log))
    durability = checks["txn_durability"]
    assert (durability.verdict, durability.checked, durability.violations) == ("failed", 3, 1)
    assert durability.examples == [
        {"ts": ended[2]["ts"], "run": RUN, "value": lost, "transactional_id": TXN_ID, "txn": 2}
    ]
    assert checks["txn_isolation"].verdict == "passed"


def test_an_input_transformed_twice_fails_exactly_once(cluster_log: ClusterLog, read: Read) -> None:
    acked, _ = planted(cluster_log)
    twice = acked[3]
    again = cluster_log.workload("txn_consumed", topic="chaos-eos", isolation="read_committed",
                                 partition=1, offset=7, value=f"eos:{twice['value']}")  # fmt: skip
    result = judged(read(cluster_log))["eos_exactly_once"]
    assert (result.verdict, result.checked, result.violations) == ("failed", 6, 1)
    (example,) = result.examples
    assert example.pop("ts") < again["ts"], "the first output's read"
    assert example == {
        "run": RUN,
        "value": twice["value"],
        "copies": 2,
        "outputs": [
            {"topic": "chaos-eos", "partition": 1, "offset": 1},
            {"topic": "chaos-eos", "partition": 1, "offset": 7},
        ],
        "rule": "input transformed more than once",
    }


def test_an_acknowledged_input_never_transformed_fails_exactly_once(
    cluster_log: ClusterLog, read: Read
) -> None:
    """The last input of partition 1 has no output, and the offsets stop short of it: only the rule
    about acknowledged inputs fails."""
    acked = chaos_run(cluster_log)
    last = acked[5]
    assert (last["partition"], last["offset"]) == (1, 2)
    transactional_workload(
        cluster_log,
        acked,
        unread=frozenset({("read_committed", f"eos:{last['value']}")}),
        offsets={"0": 3, "1": 2},
    )
    result = judged(read(cluster_log))["eos_exactly_once"]
    assert (result.verdict, result.violations) == ("failed", 1)
    assert result.examples == [
        {
            "ts": last["ts"],
            "run": RUN,
            "value": last["value"],
            "topic": "chaos",
            "partition": 1,
            "offset": 2,
            "rule": "acknowledged input never transformed",
        }
    ]


def test_offsets_committed_past_an_untransformed_input_fail_exactly_once(
    cluster_log: ClusterLog, read: Read
) -> None:
    """A record whose produce failed was stored at partition 0 offset 3 and never transformed, yet the
    loop committed offset 4 past it; and offset 2 of partition 1 was transformed although the loop
    committed only up to 2."""
    acked = chaos_run(cluster_log)
    stored = f"{RUN}-stored"
    cluster_log.workload(
        "produce_failed", topic="chaos", partition=None, value=stored, error="_MSG_TIMED_OUT"
    )
    read_back = cluster_log.workload("consumed", topic="chaos", partition=0, offset=3, value=stored)
    transactional_workload(cluster_log, acked, offsets={"0": 4, "1": 2})
    result = judged(read(cluster_log))["eos_exactly_once"]
    assert (result.verdict, result.violations) == ("failed", 2)
    by_rule = {e.pop("rule"): e for e in result.examples}
    assert by_rule[PAST_UNTRANSFORMED] == {
        "ts": read_back["ts"],
        "run": RUN,
        "value": stored,
        "topic": "chaos",
        "partition": 0,
        "offset": 3,
        "committed_offset": 4,
    }
    assert (by_rule[TRANSFORMED_ABOVE]["value"], by_rule[TRANSFORMED_ABOVE]["committed_offset"]) == (
        acked[5]["value"],
        2,
    )
    assert [e["ts"] for e in result.examples] == sorted(e["ts"] for e in result.examples)


def test_other_kinds_offsets_counts_are_not_mistyped(cluster_log: ClusterLog, read: Read) -> None:
    """``offsets`` is a count in the group coordinator's lines and a map in ``eos_group_committed``:
    neither kind's lines are mistyped, and the map is still judged."""
    cluster_log.emit("broker-1", "coordinator_loaded", partition=0, leader_epoch=1, groups=1, offsets=3,
                     records=4, skipped=0, load_ms=1.5)  # fmt: skip
    cluster_log.emit("broker-1", "group_deleted", group="g", reason="expired", offsets=2)
    chaos_run(cluster_log, transactions=True)
    logs = read(cluster_log)
    assert logs.summary["mistyped_lines"] == 0
    assert judged(logs)["eos_exactly_once"].verdict == "passed"


def test_the_checks_are_in_the_json_the_table_and_the_page(
    spark: SparkSession, cluster_log: ClusterLog, tmp_path: Path
) -> None:
    """The CLI's report (in the tests' session): the three checks beside the others, a failed one with
    its first example as the table's phrase and the page's link."""
    _, ended = planted(cluster_log)
    cluster_log.workload("txn_consumed", topic="chaos-txn", isolation="read_committed", partition=1,
                         offset=0, value=ended[1]["values"][0])  # fmt: skip
    page, out = tmp_path / "report.html", io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["audit", "--dir", str(cluster_log.root), "--json", "--html", str(page)])
    report = json.loads(out.getvalue())
    assert status == 1 and not report["passed"]
    checks = {c["name"]: c for c in report["checks"]}
    names = list(checks)
    assert (
        names.index("workload_no_duplicates") < names.index("txn_isolation") < names.index("eos_exactly_once")
    )
    assert {n: checks[n]["verdict"] for n in TXN_CHECKS} == {
        "txn_isolation": "failed",
        "txn_durability": "passed",
        "eos_exactly_once": "passed",
    }
    assert report["summary"]["violations"]["txn_isolation"] == 1
    console = Console(record=True, width=80)
    render(report, console, cluster_log.root / "audit.json")
    (line,) = [t for t in console.export_text().splitlines() if t.startswith("txn_isolation: ")]
    assert f"run {RUN}, rule aborted transaction visible to read_committed, transactional_id" in line
    html = page.read_text()
    assert "<a href='#check-txn_isolation'>" in html and "id='check-eos_exactly_once'" in html
