"""Keeps the tables of ``docs/configuration.md`` equal to the daemons' key declarations.

The keys, defaults and meanings are declared once, in ``controller/config.py`` and
``broker/config.py``; the page holds prose around generated tables. ``python -m
cluster.config_reference`` rewrites the tables in place, and a test fails when they differ.
"""

from __future__ import annotations

import re
import sys
from functools import partial
from pathlib import Path

from broker.config_keys import KEYS as BROKER_KEYS
from cluster.doc_pages import page_command
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
    return page_command("cluster.config_reference", __doc__, PAGE, render, argv)


if __name__ == "__main__":
    sys.exit(main())
