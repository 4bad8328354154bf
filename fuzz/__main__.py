"""``python -m fuzz [--seconds N] [--target T ...]``: every target (or those named) in turn, each in
its own process for an equal share of the time; exit 1 if any found a crasher."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from fuzz.targets import SEEDS, TARGETS

HERE = Path(__file__).resolve().parent
EXECUTED = "stat::number_of_executed_units"
"""libFuzzer's final statistics line with the number of inputs run."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__)
    parser.add_argument("--seconds", type=float, default=300.0, help="the whole run, shared by the targets")
    parser.add_argument("--target", action="append", choices=sorted(TARGETS), help="only these (repeatable)")
    parser.add_argument("--corpus", type=Path, default=HERE / "corpus", help="one directory per target")
    parser.add_argument("--crashers", type=Path, default=HERE / "crashers", help="where crashing inputs go")
    args = parser.parse_args(argv)
    targets = args.target or sorted(TARGETS)
    share = max(1, int(args.seconds / len(targets)))
    args.crashers.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in targets:
        corpus = args.corpus / name
        corpus.mkdir(parents=True, exist_ok=True)
        if not any(corpus.iterdir()):
            for i, seed in enumerate(SEEDS.get(name, [])):
                (corpus / f"seed-{i}").write_bytes(seed)
        command = [
            sys.executable, "-m", "fuzz.run", name,
            f"-max_total_time={share}", f"-artifact_prefix={args.crashers}/{name}-", "-print_final_stats=1",
            str(corpus),
        ]  # fmt: skip
        print(f"fuzzing {name} for {share} s", flush=True)
        done = subprocess.run(command, cwd=HERE.parent, capture_output=True, text=True)
        stats = [
            line for line in done.stderr.splitlines() if line.startswith("stat::number_of_executed_units")
        ]
        print(
            f"  {name}: exit {done.returncode}, {stats[-1].split(':')[-1].strip() if stats else '?'} inputs"
        )
        if done.returncode != 0:
            failed.append(name)
            print(done.stderr[-4000:], file=sys.stderr)
    if failed:
        print(f"crashers found by {', '.join(failed)}: see {args.crashers}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
