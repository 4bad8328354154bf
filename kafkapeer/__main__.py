"""``python -m kafkapeer resolve``: fetch Kafka's jars from Maven Central into ``.run/kafka/`` (once)."""

from __future__ import annotations

import argparse
import sys

from kafkapeer.jars import SETS, JarsMissing, resolve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkapeer", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("resolve", help="resolve every jar set (Kafka 3.9, the newest 4.x clients)")
    parser.parse_args(argv)
    try:
        for artifact_set in SETS:
            directory = resolve(artifact_set)
            print(f"{artifact_set.name}: {len(list((directory / 'lib').glob('*.jar')))} jars in {directory}")
    except JarsMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
