"""The README and docs/ point at things that exist: files, headings, modules and commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_PATH = re.compile(r"`((?:[a-z_]+/)+[a-z_]+\.(?:py|json|yml))")
GENERATED = ("bench/results/",)
"""Outputs of commands, not in the repository."""


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


def ids(pages: list[Path]) -> list[str]:
    return [str(p.relative_to(REPO)) for p in pages]


@pytest.mark.parametrize("page", PAGES, ids=ids(PAGES))
def test_relative_links_reach_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists() or (anchor and resolved.suffix == ".md" and anchor not in anchors(resolved)):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=ids(PAGES))
def test_files_named_in_code_spans_exist(page: Path) -> None:
    text = page.read_text()
    named = {p for p in CODE_PATH.findall(text) if not p.startswith(GENERATED)}
    missing = sorted(p for p in named if not (REPO / p).exists())
    assert missing == []


def test_every_bench_module_the_readme_lists_exists_and_make_bench_runs_it() -> None:
    readme = (REPO / "README.md").read_text()
    makefile = (REPO / "Makefile").read_text()
    listed = re.findall(r"^\| `bench\.([a-z_]+)`", readme, re.M)
    assert listed
    for name in listed:
        assert (REPO / "bench" / f"{name}.py").exists(), name
        assert f"-m bench.{name}" in makefile, name


def test_every_cluster_command_the_readme_names_exists() -> None:
    from cluster.__main__ import parser

    commands = parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    readme = (REPO / "README.md").read_text()
    used = set(re.findall(r"^\$C ([a-z-]+)", readme, re.M))
    assert used and used <= set(commands), used - set(commands)
