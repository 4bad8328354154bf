"""The layout the docs promise: packages on floors, no import circles, a controller core without I/O.

Both are read off the source with ``ast``, so they hold for imports under ``TYPE_CHECKING`` too
(a circle there still means two modules that cannot be understood apart).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FLOORS: dict[str, int] = {
    "protocol": 0,
    "daemon": 1,
    "placement": 1,
    "security": 2,
    "network": 3,
    "zkstore": 4,
    "authorizer": 5,
    "admin": 5,
    "controller": 6,
    "broker": 6,
    "zkserver": 7,
    "kafkapeer": 7,
    "cluster": 8,
    "deploy": 8,
    "chaos": 9,
    "bench": 9,
    "pipeline": 9,
    "fuzz": 9,
}
"""Each package's floor: a module may import only from its own package or from a lower floor.

Packages on one floor know nothing of each other (the two daemons, say). ``docs/architecture.md`` draws
this table; :func:`test_the_architecture_page_draws_these_floors` keeps the two the same.
"""
PACKAGES = tuple(FLOORS)

PURE_CONTROLLER_CORE = (
    "controller.broker_change",
    "controller.leader_election",
    "controller.partition_changes",
    "controller.alter_partition",
    "controller.phantom_replicas",
    "controller.request_batch",
    "controller.state_tables",
    "controller.state_machines",
    "controller.queries",
    "controller.context",
    "controller.model",
)
"""The modules that decide: classification, elections, partition changes, AlterPartition validation,
request batches, state tables and transitions, queries, and the data they read."""

IO_MODULES = ("asyncio", "kazoo", "zkstore.aio", "socket", "threading")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def imports_of(name: str, path: Path) -> Iterator[str]:
    """Every module ``path`` imports, absolute, including ``from package import module`` forms."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def project_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {
        name: {target for target in imports_of(name, path) if target in modules and target != name}
        for name, path in modules.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the list of modules around it, or None (iterative DFS)."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return [*path[path.index(child) :], child]
            elif child not in done:
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
                on_path.add(child)
    return None


def test_the_project_has_no_import_circle() -> None:
    cycle = find_cycle(project_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def upward_imports(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    """Every import of a module from a package on the same or a higher floor, as ``a -> b`` lines."""
    found = []
    for source, targets in sorted(graph.items()):
        home = source.split(".")[0]
        for target in sorted(targets):
            there = target.split(".")[0]
            if there != home and floors[there] >= floors[home]:
                found.append(f"{source} -> {target} (floor {floors[home]} -> {floors[there]})")
    return found


def test_packages_import_only_from_lower_floors() -> None:
    """Package level, every import counted: module level, inside functions and under ``TYPE_CHECKING``."""
    upward = upward_imports(project_graph(), FLOORS)
    assert not upward, "imports that do not go down a floor:\n" + "\n".join(upward)


def test_every_package_has_a_floor() -> None:
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages == set(FLOORS), f"packages without a floor: {sorted(packages - set(FLOORS))}"


def test_the_floor_check_finds_an_upward_import() -> None:
    graph = {"low.a": {"high.b"}, "high.b": {"low.c"}, "low.c": set(), "side.d": {"peer.e"}, "peer.e": set()}
    floors = {"low": 0, "high": 1, "side": 2, "peer": 2}
    assert upward_imports(graph, floors) == [
        "low.a -> high.b (floor 0 -> 1)",
        "side.d -> peer.e (floor 2 -> 2)",
    ]


def floors_drawn(page: str) -> dict[str, int]:
    """The floors table of ``docs/architecture.md``: rows ``| N | `pkg/`, `pkg/` | ... |``."""
    section = page.split("<!-- floors -->")[1].split("<!-- /floors -->")[0]
    drawn: dict[str, int] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].isdigit():
            for name in cells[1].split(","):
                drawn[name.strip().strip("`").rstrip("/")] = int(cells[0])
    return drawn


def test_the_architecture_page_draws_these_floors() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert floors_drawn(page) == FLOORS


def test_the_cycle_finder_finds_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("module", PURE_CONTROLLER_CORE)
def test_the_controller_core_imports_nothing_that_does_io(module: str) -> None:
    """Transitively: a pure module that imports a shell module is not pure either."""
    graph = project_graph()
    modules = project_modules()
    seen, pending = {module}, [module]
    while pending:
        current = pending.pop()
        for target in imports_of(current, modules[current]):
            io = next((m for m in IO_MODULES if target == m or target.startswith(m + ".")), None)
            assert io is None, f"{module} reaches {io} through {current}"
        for target in graph[current] - seen:
            seen.add(target)
            pending.append(target)


def test_importing_the_controller_core_loads_no_io_module() -> None:
    """The same promise at run time, in a fresh interpreter (``logging`` brings threading; that is all)."""
    code = (
        "import importlib, sys\n"
        f"for name in {list(PURE_CONTROLLER_CORE)!r}: importlib.import_module(name)\n"
        "print(sorted(m for m in ('asyncio', 'kazoo', 'zkstore.aio', 'socket') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_daemons_load_none_of_the_command_line_packages() -> None:
    """The Docker image installs only the daemons' dependencies (pyproject's ``dependencies``)."""
    code = (
        "import sys\n"
        "import broker.server, controller.daemon, broker.__main__, controller.__main__\n"
        "tools = ('rich', 'confluent_kafka', 'kafka', 'pyspark', 'cluster', 'chaos', 'zkserver')\n"
        "print(sorted(m for m in tools if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
LONG_BY_NATURE = ("protocol/messages/",)
"""Message schemas are one long declaration each, as Kafka's JSON specs are."""


def source_files() -> list[Path]:
    """Every Python file of the project's packages and of its tests."""
    return sorted(p for package in (*PACKAGES, "tests") for p in (ROOT / package).rglob("*.py"))


def oversized(paths: list[Path], max_module: int, max_function: int) -> list[str]:
    """Modules longer than ``max_module`` lines and functions longer than ``max_function``, one line each."""
    found = []
    for path in paths:
        where = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines > max_module and not where.startswith(LONG_BY_NATURE):
            found.append(f"{where}: {lines} lines")
        for node in ast.walk(ast.parse(text, where)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > max_function:
                    found.append(f"{where}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_module_or_function_is_a_room_of_several_jobs() -> None:
    """Size is the symptom the split of the big rooms cured; a module that grows past it holds two jobs."""
    found = oversized(source_files(), MAX_MODULE_LINES, MAX_FUNCTION_LINES)
    assert not found, "split along the job's seams:\n" + "\n".join(found)


def test_the_size_check_finds_a_long_module_and_a_long_function(tmp_path: Path) -> None:
    long = tmp_path / "long.py"
    long.write_text('"""Too long."""\n\n\ndef f() -> None:\n' + "    pass\n" * 5 + "\n" * 10)
    assert oversized([long], 12, 4) == [f"{long}: 19 lines", f"{long}:4 f: 6 lines"]


def test_every_module_says_its_job_first() -> None:
    missing = [
        str(p.relative_to(ROOT))
        for p in source_files()
        if p.read_text(encoding="utf-8").strip()
        and ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) is None
    ]
    assert not missing, "modules without a docstring: " + ", ".join(missing)
