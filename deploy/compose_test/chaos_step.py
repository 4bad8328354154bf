"""The plain run's last step: ``python -m chaos run --compose`` on the containers, its logs then audited.

The chaos run breaks the project's containers under a recorded workload and gives the same verdict
as on local processes; the daemons' event logs it copies out of the containers are then audited by
``python -m pipeline audit`` beside the run.
"""

from __future__ import annotations

import json
import shutil
import sys

from deploy.compose import COMPOSE_FILE
from deploy.compose_test import PROJECT, Run
from deploy.compose_test.client import CACHE, CheckFailed
from deploy.engine import run

__all__ = ["step_chaos"]

CHAOS_DIR = CACHE / "chaos"
CHAOS_ARGS = ("--duration", "40", "--interval", "6", "--seed", "1")
CHAOS_FAULTS = "kill,bounce,restart,pause,isolate,zookeeper-leader-kill"


def step_chaos(run_: Run) -> str:
    """``python -m chaos run --compose`` against the project: faults on containers under a recorded
    workload, the same verdict as on local processes; then the daemons' event logs, copied out of the
    containers, are audited by ``python -m pipeline audit`` beside the run."""
    shutil.rmtree(CHAOS_DIR, ignore_errors=True)
    chaos = [sys.executable, "-m", "chaos", "run", "--compose", str(COMPOSE_FILE), "--project", PROJECT]
    chaos += ["--dir", str(CHAOS_DIR), *CHAOS_ARGS, "--faults", CHAOS_FAULTS]
    result = _python(chaos, run_.compose.environment)
    lines = [line for line in result.splitlines() if line.strip()]
    runs = sorted((CHAOS_DIR / "chaos").glob("run-*/events.jsonl"))
    if len(runs) != 1:
        raise CheckFailed(f"expected one run under {CHAOS_DIR / 'chaos'}, found {runs}")
    events = [json.loads(line) for line in runs[0].read_text().splitlines()]
    faults = [
        f"{e['fault']} {e['target']}"
        for e in events
        if e["kind"] == "fault_injected" and e["fault"] != "resume"
    ]
    copied = sorted(p.parent.name for p in CHAOS_DIR.glob("*/events.jsonl"))
    if len(copied) != run_.daemon_count:
        raise CheckFailed(f"event logs copied out of {copied}, expected {run_.daemon_count} daemons")
    audit = [sys.executable, "-m", "pipeline", "audit", "--dir", str(CHAOS_DIR), "--json"]
    report = json.loads(_python(audit, {}))
    checks = {c["name"]: c["verdict"] for c in report["checks"]}
    verdict = next((line for line in lines if line.startswith("ok: every acknowledged")), lines[-1])
    return (
        f"faults {', '.join(faults)}; {verdict}; event logs of {', '.join(copied)}; audit: "
        f"{sum(v == 'passed' for v in checks.values())} of {len(checks)} checks passed"
    )


def _python(argv: list[str], environment: dict[str, str]) -> str:
    """A project command's stdout; its exit status must be 0 (its output is in the failure)."""
    done = run(argv, env=environment, check=False, timeout=900)
    if done.returncode != 0:
        output = (done.stdout + done.stderr)[-3000:]
        raise CheckFailed(f"{' '.join(argv[2:5])} exited {done.returncode}:\n{output}")
    return done.stdout
