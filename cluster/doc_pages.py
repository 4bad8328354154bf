"""Pages under docs/ whose tables are generated from the code (the configuration and metrics
references): one command line that rewrites a page, or with ``--check`` says it is out of date."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["page_command"]


def page_command(
    module: str, description: str | None, page: Path, render: Callable[[str], str], argv: list[str] | None
) -> int:
    """``python -m <module> [--check] [--page FILE]``: ``render`` turns the page's text into what it
    should be; exit 1 with ``--check`` when they differ."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is out of date")
    parser.add_argument("--page", type=Path, default=page)
    args = parser.parse_args(argv)
    current = args.page.read_text(encoding="utf-8")
    updated = render(current)
    if args.check:
        if updated != current:
            print(f"{args.page} is out of date: run python -m {module}", file=sys.stderr)
            return 1
        return 0
    if updated != current:
        args.page.write_text(updated, encoding="utf-8")
        print(f"updated {args.page}")
    return 0
