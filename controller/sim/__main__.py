"""``python -m controller.sim``: run seeds of the controller's deterministic simulation, or replay one.

    python -m controller.sim --seeds 1000 --steps 2000      # seeds 1..1000; exit 1 if any fails
    python -m controller.sim --budget-s 60                  # as many seeds as fit in 60 s
    python -m controller.sim --seed 17 --trace              # one seed, its minimal failing schedule

A failing seed prints its violation; ``--trace`` shrinks its schedule and prints it, step by step,
with the controllers' elections and resignations. Every run is exact: the same seed, steps and
options give the same schedule, on any machine (the command fixes ``PYTHONHASHSEED``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from controller.sim.plants import PLANTS, planted
from controller.sim.run import Outcome, run
from controller.sim.shrink import shrink
from controller.sim.world import SimSettings

HASH_SEED = "0"


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m controller.sim", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seeds", type=int, help="how many seeds to run (default 100, or unbounded with --budget-s)"
    )
    parser.add_argument("--first", type=int, default=1, help="the first seed (default 1)")
    parser.add_argument("--seed", type=int, help="run this one seed")
    parser.add_argument("--steps", type=int, default=2000, help="scheduler steps per seed (default 2000)")
    parser.add_argument("--budget-s", type=float, help="stop starting seeds after this many seconds")
    parser.add_argument("--trace", action="store_true", help="shrink a failure and print its schedule")
    parser.add_argument("--stop", action="store_true", help="stop at the first failing seed")
    parser.add_argument("--brokers", type=int, default=SimSettings().brokers)
    parser.add_argument("--controllers", type=int, default=SimSettings().controllers)
    parser.add_argument("--fault-weight", type=float, default=SimSettings().fault_weight)
    parser.add_argument(
        "--delete-topic-enable",
        choices=("true", "false", "by-seed"),
        default="by-seed",
        help="the controllers' delete.topic.enable (default: false for every third seed)",
    )
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: one per core)"
    )
    parser.add_argument("--plant", choices=sorted(PLANTS), help="put back a fixed bug (to show it is found)")
    parser.add_argument("--json", help="write the summary as JSON to this file")
    parser.add_argument("--verbose", action="store_true", help="the controllers' logs on stderr")
    return parser.parse_args(argv)


def _print_trace(outcome: Outcome, settings: SimSettings) -> None:
    minimal = shrink(outcome, lambda script: run(outcome.seed, 0, settings, script))
    kept, total = len(minimal.steps), len(outcome.steps)
    print(f"minimal schedule ({kept} of {total} steps), replay of seed {outcome.seed}:")
    for index, label in enumerate(minimal.steps):
        print(f"  {index:4d}  {label}")
    print("  then: every fault healed, the cluster settled" if minimal.failed_at is None else "")
    print("controller events:")
    for note in minimal.notes:
        print(f"  {note}")
    print(f"violation: {minimal.violation}")


def _settings(args: argparse.Namespace, seed: int) -> SimSettings:
    deletion = args.delete_topic_enable == "true" or (args.delete_topic_enable == "by-seed" and seed % 3 != 0)
    return replace(
        SimSettings(),
        brokers=args.brokers,
        controllers=args.controllers,
        fault_weight=args.fault_weight,
        delete_topic_enable=deletion,
    )


def _one(job: tuple[argparse.Namespace, int]) -> Outcome:
    args, seed = job
    with planted(args.plant):
        return run(seed, args.steps, _settings(args, seed))


def _seeds(args: argparse.Namespace) -> Iterable[int]:
    if args.seed is not None:
        return [args.seed]
    if args.seeds is None and args.budget_s is not None:
        return itertools.count(args.first)
    return range(args.first, args.first + (args.seeds or 100))


def _report(args: argparse.Namespace, ran: int, elapsed: float, failures: list[dict[str, object]]) -> None:
    per_minute = ran / elapsed * 60 if elapsed else 0.0
    rate = f"{per_minute:.0f} per minute"
    print(f"{ran} seeds of {args.steps} steps in {elapsed:.1f} s ({rate}): {len(failures)} failed")
    if args.json:
        summary = {
            "seeds": ran,
            "steps": args.steps,
            "seconds": round(elapsed, 3),
            "per_minute": round(per_minute, 1),
            "plant": args.plant,
            "failures": failures,
        }
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        os.environ["PYTHONHASHSEED"] = HASH_SEED  # set iteration order is part of a schedule
        os.execv(sys.executable, [sys.executable, "-m", "controller.sim", *(argv or sys.argv[1:])])
    args = _arguments(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    seeds = _seeds(args)
    started = time.monotonic()
    ran, failures = 0, list[dict[str, object]]()
    jobs = 1 if args.seed is not None else max(1, args.jobs)
    with multiprocessing.get_context("fork").Pool(jobs) if jobs > 1 else contextlib.nullcontext() as pool:
        work = ((args, seed) for seed in seeds)
        outcomes = pool.imap(_one, work) if pool is not None else map(_one, work)
        for outcome in outcomes:
            if args.budget_s is not None and time.monotonic() - started > args.budget_s:
                break
            ran += 1
            if outcome.failed:
                where = "while settling" if outcome.failed_at is None else f"at step {outcome.failed_at}"
                print(f"seed {outcome.seed}: {outcome.violation} ({where})", flush=True)
                failures.append(
                    {"seed": outcome.seed, "violation": outcome.violation, "step": outcome.failed_at}
                )
                if args.trace:
                    with planted(args.plant):
                        _print_trace(outcome, _settings(args, outcome.seed))
                if args.stop:
                    break
    _report(args, ran, time.monotonic() - started, failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
