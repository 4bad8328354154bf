"""``make compose-test``: docker-compose.yml on a real Docker engine, used and broken from the host.

It installs and starts the engine if needed, builds the local images (:mod:`deploy.images`), and starts
the real compose file with only its image variables set, then: waits for every healthcheck, creates a
topic and produces and consumes through the published ports with confluent-kafka, asks Prometheus
whether every target is up, and takes brokers away three ways (``docker kill``, ``docker pause`` past
the ZooKeeper session timeout, ``docker network disconnect``), checking each time that the controller
moves leadership and that the broker rejoins with a new epoch. It ends with ``docker compose down -v``,
also when a step fails, and checks that no container, network or volume of the run is left.

Grafana is left out: no image of it can be built without a registry. The run uses a project name of
its own (``-p``), so it never touches a cluster someone started from the same file.

This module is the command: which steps each variant takes, and the summary and JSON report of a run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from deploy.compose import Compose
from deploy.compose_test import PROJECT, Run, StepFunction, execute
from deploy.compose_test.chaos_step import step_chaos
from deploy.compose_test.client import CACHE
from deploy.compose_test.faults import step_disconnect, step_kill, step_pause
from deploy.compose_test.secure import SECURE_FILES, ZOOKEEPER_ADMIN_ARGS, step_client_config
from deploy.compose_test.steps import (
    step_after_faults,
    step_engine,
    step_healthy,
    step_images,
    step_preflight,
    step_prometheus,
    step_round_trip,
    step_topic,
    step_up,
)

__all__ = ["SECURE_STEPS", "STEPS", "main"]

STEPS: tuple[tuple[str, StepFunction], ...] = (
    ("engine", step_engine),
    ("images", step_images),
    ("preflight", step_preflight),
    ("up", step_up),
    ("healthy", step_healthy),
    ("topic", step_topic),
    ("produce and consume", step_round_trip),
    ("prometheus targets", step_prometheus),
    ("kill a broker", step_kill),
    ("pause a broker", step_pause),
    ("disconnect a broker", step_disconnect),
    ("produce and consume after the faults", step_after_faults),
    ("chaos on containers, audited", step_chaos),
)


SECURE_STEPS: tuple[tuple[str, StepFunction], ...] = (
    *STEPS[:4],
    ("client config", step_client_config),
    *STEPS[4:8],
)
"""The secured variant: up, healthy, a round trip with the generated client settings, Prometheus."""


def summary(run_: Run, total_s: float) -> str:
    width = max(len(step.name) for step in run_.steps)
    lines = [
        f"{step.name:<{width}}  {step.seconds:6.1f} s  {'ok' if step.ok else 'FAILED'}" for step in run_.steps
    ]
    return "\n".join([*lines, f"{'total':<{width}}  {total_s:6.1f} s"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.compose_test", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--secure",
        action="store_true",
        help="the secured variant (docker-compose.secure.yml on top): up, a round trip as admin over "
        "SASL_SSL, Prometheus, down",
    )
    parser.add_argument(
        "--report", type=Path, help="step times, as JSON (default: .run/docker/compose-test*.json)"
    )
    args = parser.parse_args(argv)
    report_path = args.report or CACHE / ("compose-test-secure.json" if args.secure else "compose-test.json")
    started = time.monotonic()
    if args.secure:
        run_ = Run(
            Compose(environment={}, project=PROJECT, files=SECURE_FILES, admin_args=ZOOKEEPER_ADMIN_ARGS)
        )
        passed = execute(run_, SECURE_STEPS)
    else:
        run_ = Run(Compose(environment={}, project=PROJECT))
        passed = execute(run_, STEPS)
    total = time.monotonic() - started
    print(summary(run_, total))
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report = {"passed": passed, "total_s": round(total, 1), "steps": [asdict(step) for step in run_.steps]}
    report_path.write_text(json.dumps(report, indent=2) + "\n")
    failed = sum(not step.ok for step in run_.steps)
    print(f"compose-test: {len(run_.steps) - failed} passed, {failed} failed")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
