"""Many chaos runs in a row, each on a fresh cluster with its own seed, summed up in one JSON file.

What a single run proves depends on which faults its seed drew; a campaign of N runs with listed
seeds is the claim "no acknowledged record lost, no inconsistent replica, no safety violation" made
over many schedules, with the availability figures per fault kind (the worst over all runs).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from chaos.run import RunConfig, RunResult, run
from cluster import launcher, node_control

log = logging.getLogger("chaos.campaign")


@dataclass(frozen=True)
class CampaignConfig:
    directory: Path
    runs: int
    first_seed: int
    layout: launcher.Layout
    run: RunConfig


def _row(seed: int, result: RunResult, seconds: float) -> dict[str, Any]:
    v = result.verdict
    return {
        "seed": seed,
        "run_id": result.run_id,
        "ok": result.ok,
        "acked": v.acked,
        "failed": v.failed,
        "lost": len(v.lost),
        "unexplained_duplicates": len(v.unexplained_duplicates),
        "misplaced": len(v.misplaced),
        "transactions": result.txn.outcomes,
        "transactions_ok": result.txn.ok,
        "transformed": result.txn.transformed,
        "faults": v.faults,
        "unsafe": result.unsafe,
        "inconsistent": result.inconsistent,
        "availability": result.availability,
        "controllers": result.controllers,
        "seconds": round(seconds, 1),
    }


def worst(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Fault kind -> the longest figures over every run."""
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        for fault, figures in row["availability"].items():
            entry = out.setdefault(fault, {"without_controller_s": 0.0, "leaderless_s": 0.0})
            for key, value in figures.items():
                entry[key] = max(entry[key], value)
    return out


def campaign(config: CampaignConfig) -> dict[str, Any]:
    """Run ``config.runs`` runs, seeds ``first_seed`` on; ``DIR/campaign.json`` holds the summary and
    is rewritten after every run, so an interrupted campaign keeps what it did."""
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for i in range(config.runs):
        seed = config.first_seed + i
        cluster_dir = config.directory / f"seed-{seed}"
        shutil.rmtree(cluster_dir, ignore_errors=True)
        started = time.monotonic()
        asyncio.run(launcher.up(cluster_dir, config.layout))
        try:
            result = asyncio.run(run(_with(config.run, cluster_dir, seed)))
        finally:
            node_control.down(cluster_dir)
        rows.append(_row(seed, result, time.monotonic() - started))
        log.info("seed %d: %s", seed, "ok" if result.ok else "FAILED")
        summary = {
            "runs": len(rows),
            "ok": sum(r["ok"] for r in rows),
            "acked": sum(r["acked"] for r in rows),
            "lost": sum(r["lost"] for r in rows),
            "transactions": {
                outcome: sum(r["transactions"].get(outcome, 0) for r in rows)
                for outcome in ("committed", "aborted", "unknown")
            },
            "transactions_failed": sum(not r["transactions_ok"] for r in rows),
            "inconsistent": sum(len(r["inconsistent"]) for r in rows),
            "unsafe": sum(len(r["unsafe"]) for r in rows),
            "controllers": {
                kind: sum(r["controllers"].get(kind, 0) for r in rows) for kind in ("ours", "kafka")
            },
            "seeds": [r["seed"] for r in rows],
            "worst_availability": worst(rows),
            "results": rows,
        }
        (config.directory / "campaign.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _with(template: RunConfig, directory: Path, seed: int) -> RunConfig:
    return replace(template, directory=directory, seed=seed)
