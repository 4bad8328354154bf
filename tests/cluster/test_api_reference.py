"""docs/protocol.md's API table is written from the codec's registry and the daemons' handler tables,
and must not drift from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster import api_reference
from protocol.registry import APIS

DASH = "\N{EN DASH}"
"""Between the first and last version of a run."""


@pytest.fixture(scope="module")
def table() -> str:
    return api_reference.current_table()


def test_the_committed_page_matches_the_codec_and_the_daemons(table: str) -> None:
    page = api_reference.PAGE.read_text(encoding="utf-8")
    assert api_reference.render(page, table) == page, "run: python -m cluster.api_reference"


def test_every_api_of_the_codec_is_a_row_with_its_versions(table: str) -> None:
    rows = {int(line.split(" | ")[0].removeprefix("| ")): line for line in table.splitlines()[2:]}
    assert set(rows) == set(APIS)
    assert "| 4 | LeaderAndIsr | 2, 5 | no | broker |" in rows[4] and "v5: seed variant" in rows[4]
    assert "| 6 | UpdateMetadata | 5, 7 | no | broker |" in rows[6] and "v7: seed variant" in rows[6]
    assert "| 5 | StopReplica | 1, 4 | no | broker |" in rows[5] and "v4: seed variant" in rows[5]
    assert rows[0].startswith(f"| 0 | Produce | 3{DASH}8 | no | broker |")
    assert rows[56].startswith(f"| 56 | AlterPartition | 0{DASH}2 | 0{DASH}2 | controller |")
    assert rows[43].startswith(f"| 43 | ElectLeaders | 0{DASH}2 | 2 | broker, controller |")
    assert "SASL listeners" in rows[17] and "SASL listeners" in rows[36]


def test_versions_are_written_as_runs() -> None:
    assert api_reference.versions_cell([3, 4, 5, 6]) == f"3{DASH}6"
    assert api_reference.versions_cell([5, 2]) == "2, 5"
    assert api_reference.versions_cell([0, 1, 2, 7]) == f"0{DASH}2, 7"
    assert api_reference.versions_cell([0]) == "0"


def test_a_page_without_its_markers_is_an_error_not_a_silent_no_op() -> None:
    with pytest.raises(ValueError, match="apis"):
        api_reference.render("# Protocol\n", "| x |")


def test_check_mode_fails_on_a_stale_page(tmp_path: Path) -> None:
    page = tmp_path / "protocol.md"
    page.write_text("# Protocol\n\n<!-- apis -->\n| old |\n<!-- /apis -->\n")
    assert api_reference.main(["--check", "--page", str(page)]) == 1
    assert api_reference.main(["--page", str(page)]) == 0
    assert api_reference.main(["--check", "--page", str(page)]) == 0
    assert "| 56 | AlterPartition |" in page.read_text()
