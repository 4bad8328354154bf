"""Keeps the tables of ``docs/configuration.md`` equal to the daemons' key declarations.

The keys, defaults and meanings are declared once, in ``controller/config.py`` and
``broker/config.py``; the page holds prose around generated tables. ``python -m
cluster.config_reference`` rewrites the tables in place, and a test fails when they differ.
"""

from __future__ import annotations

import argparse
import re
import sys
from functools import partial
from pathlib import Path

from broker.config import KEYS as BROKER_KEYS
from controller.config import KEYS as CONTROLLER_KEYS
from daemon.config import reference_table

PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
TABLES = {"controller": CONTROLLER_KEYS, "broker": BROKER_KEYS}


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- keys:{name} -->\n).*?(\n<!-- /keys:{name} -->)", re.S)


def render(page: str) -> str:
    """``page`` with every marked table regenerated; ValueError if a marker pair is missing."""
    for name, keys in TABLES.items():
        pattern = _block(name)
        if not pattern.search(page):
            raise ValueError(f"no <!-- keys:{name} --> … <!-- /keys:{name} --> block")
        page = pattern.sub(partial(_fill, reference_table(keys)), page)
    return page


def _fill(table: str, block: re.Match[str]) -> str:
    """A marked block with ``table`` between its markers."""
    return block.group(1) + table + block.group(2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cluster.config_reference", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is out of date")
    parser.add_argument("--page", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    current = args.page.read_text(encoding="utf-8")
    updated = render(current)
    if args.check:
        if updated != current:
            print(f"{args.page} is out of date: run python -m cluster.config_reference", file=sys.stderr)
            return 1
        return 0
    if updated != current:
        args.page.write_text(updated, encoding="utf-8")
        print(f"updated {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
