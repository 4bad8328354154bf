"""How the audit grows with the history: wall time, peak memory and rows per second, with a floor.

For each ``--rows`` size, ``bench.audit_logs`` writes a consistent cluster directory, then two fresh
processes run on it, each with a JVM of its own, as a user would run them:

* the floor: a Spark session that reads every line, parses it with the audit's schema and counts
  the lines whose ``ts`` is set (one pass over the input: what any audit must pay at least). Spark
  narrows ``from_json`` to the fields a query uses, so this floor parses ``ts`` alone and skips
  over the rest of each line; it is the floor issue 30's targets were set against;
* the floor of every field: the same pass converting every field of the schema (it counts the lines
  whose parsed object is not null, which Spark cannot narrow), what an audit reading all the fields
  cannot go below;
* the audit: ``python -m pipeline audit --dir DIR --json``.

Peak memory is the largest sum of the resident sets of the process and every descendant (the JVM
among them), sampled every 0.2 s from /proc. Results go to bench/results/pipeline.json: per size, the
seconds and peak RSS of both, the audit's rows per second, and the audit over the floor.

    .venv/bin/python -m bench.pipeline [--rows 20000,1000000,10000000] [--keep DIR] [--dir CLUSTER_DIR]

Both JVMs map the audit's class-data archive (``pipeline.jvm``): if there is none yet, an audit run
before the two records it, unmeasured, so that the figures are those of every audit after a machine's
first.

``--dir`` measures a directory that exists instead (a real chaos run's: the "small directory" of a
local cluster), with the same two processes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.audit_logs import generate
from bench.machine import machine, write_report
from bench.measure import status_kib

OUT = Path(__file__).parent / "results" / "pipeline.json"
DIR_OUT = OUT.with_name("pipeline-dir.json")
SAMPLE_S = 0.2
NOT_GENERATED = ("txn_isolation", "txn_durability", "eos_exactly_once")
"""The checks of the transactional workload, which ``bench.audit_logs`` does not write: skipped on its
directories by design, so listed apart (``checks_not_generated``) from the skips that would mean a
generated directory lacks what it promises."""
FLOOR = """
import sys
from pathlib import Path
from pipeline.load import ddl_schema, find_inputs
from pipeline.session import local_session
from pyspark.sql import functions as F
inputs = find_inputs(Path(sys.argv[1]))
spark = local_session(jvm_log=Path(sys.argv[2]), input_bytes=inputs.size)
paths = [str(p) for p in (*inputs.event_files, *inputs.history_files)]
parsed = spark.read.text(paths).select(F.from_json("value", ddl_schema()).alias("j"))
if sys.argv[3] == "ts":
    print(parsed.select("j.*").filter(F.col("ts").isNotNull()).count())
else:
    print(parsed.filter(F.col("j").isNotNull()).count())
spark.stop()
"""


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def _rss_kb(pid: int) -> int:
    try:
        return status_kib("VmRSS", pid)
    except (OSError, KeyError):
        return 0


def tree_rss_kb(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        total += _rss_kb(current)
        stack += _children(current)
    return total


def measured(argv: list[str]) -> tuple[dict[str, Any], str, str]:
    """Run ``argv``; its wall time and the peak RSS of its process tree, its stdout and its stderr."""
    peak = 0
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss_kb(process.pid))
            done.wait(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    seconds = time.monotonic() - started
    done.set()
    sampler.join()
    if process.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(argv[:4])} exited {process.returncode}:\n{err[-3000:]}")
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(peak / 1024)}, out, err


def class_data_archive() -> Path | None:
    """Where the audit's JVM keeps its class-data archive (``pipeline.jvm``, asked in a process of its
    own: bench and pipeline share a floor)."""
    asked = "from pipeline.jvm import archive_path; print(archive_path() or '')"
    done = subprocess.run([sys.executable, "-c", asked], capture_output=True, text=True, check=True)
    return Path(done.stdout.strip()) if done.stdout.strip() else None


def one_size(rows: int, directory: Path) -> dict[str, Any]:
    started = time.monotonic()
    written = generate(directory, rows)
    generated_s = time.monotonic() - started
    return one_directory(
        directory,
        {"history_rows": written["history_rows"], "generate_s": round(generated_s, 1)},
        not_generated=NOT_GENERATED,
    )


def one_directory(
    directory: Path, described: dict[str, Any], not_generated: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The floor and the audit of ``directory``, after what ``described`` says of it; the checks
    ``not_generated`` had nothing to judge by design, and their skips are listed apart."""
    log = directory.parent / f"{directory.name}-spark.log"
    report_file = directory.parent / f"{directory.name}-audit.json"
    command = [sys.executable, "-m", "pipeline", "audit", "--dir", str(directory), "--out", str(report_file)]
    archive = class_data_archive()
    recorded = archive is not None and not archive.is_file()
    if recorded:
        measured([*command, "--json"])
    floor, counted, _ = measured([sys.executable, "-c", FLOOR, str(directory), str(log), "ts"])
    every_field, _, _ = measured([sys.executable, "-c", FLOOR, str(directory), str(log), "all"])
    audit, out, err = measured([*command, "--json"])
    report = json.loads(report_file.read_text())
    try:
        stdout_is_the_report = json.loads(out) == report
    except ValueError:
        stdout_is_the_report = False
    lines = int(counted.strip())
    failed = [c["name"] for c in report["checks"] if c["verdict"] == "failed"]
    skipped = [c["name"] for c in report["checks"] if c["verdict"] == "skipped"]
    result = {
        **described,
        "lines": lines,
        "floor": floor,
        "audit": audit,
        "audit_rows_per_s": round(lines / audit["seconds"]),
        "audit_over_floor": round(audit["seconds"] / floor["seconds"], 2),
        "floor_every_field": every_field,
        "audit_over_floor_every_field": round(audit["seconds"] / every_field["seconds"], 2),
        "class_data_archive": {"path": str(archive), "recorded_first": recorded} if archive else None,
        "checks_failed": failed,
        "checks_skipped": [name for name in skipped if name not in not_generated],
        **({"checks_not_generated": [n for n in skipped if n in not_generated]} if not_generated else {}),
        "audit_stderr": err,
        "audit_stdout_is_the_report": stdout_is_the_report,
        **({} if stdout_is_the_report else {"audit_stdout_head": out[:500]}),
    }
    print(json.dumps(result), flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pipeline", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rows", default="20000,1000000", help="history sizes, comma-separated (20000,1000000)"
    )
    parser.add_argument("--keep", type=Path, help="generate under this directory and keep it")
    parser.add_argument("--dir", type=Path, help="measure this cluster directory instead of generated ones")
    parser.add_argument("--out", type=Path, help=f"results (default {OUT}, with --dir {DIR_OUT})")
    args = parser.parse_args(argv)
    if args.dir is not None:
        result = one_directory(args.dir.resolve(), {"directory": str(args.dir)})
        write_report(args.out or DIR_OUT, {"benchmark": "pipeline", "machine": machine(), "sizes": [result]})
        return 0 if not result["checks_failed"] else 1
    sizes = [int(float(n)) for n in args.rows.split(",") if n]
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    try:
        results = [one_size(rows, base / f"rows-{rows}") for rows in sizes]
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    write_report(
        args.out or OUT,
        {
            "benchmark": "pipeline",
            "machine": machine(),
            "note": "audit = python -m pipeline audit in a fresh process; floor = a fresh Spark session "
            "that parses every line's ts once and counts them; floor_every_field = the same, converting "
            "every field",
            "sizes": results,
        },
    )
    return 0 if all(not r["checks_failed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
