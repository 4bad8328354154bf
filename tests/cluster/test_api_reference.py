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
    # The columns: KAFKA dialect, SEED dialect (the seed's own layouts marked), flexible (Kafka's).
    assert "| 4 | LeaderAndIsr | 2, 7 | 2, 5 (seed), 7 | 7 | broker |" in rows[4]
    assert "| 6 | UpdateMetadata | 5, 8 | 5, 7 (seed), 8 | 8 | broker |" in rows[6]
    assert "| 5 | StopReplica | 1, 4 | 1, 4 (seed) | 4 | broker |" in rows[5]
    for key, seed in ((4, 5), (6, 7), (5, 4)):
        assert f"v{seed} (seed): seed 002's variant" in rows[key]
    assert "v4: Apache Kafka's, KAFKA dialect only, what Kafka 3.9 sends" in rows[5]
    assert rows[0].startswith(f"| 0 | Produce | 3{DASH}8 | 3{DASH}8 | no | broker |")
    assert rows[7].startswith(f"| 7 | ControlledShutdown | 2{DASH}3 | 2{DASH}3 | 3 | controller |")
    assert rows[56].startswith(f"| 56 | AlterPartition | 0{DASH}3 | 0{DASH}3 | 0{DASH}3 | controller |")
    assert rows[43].startswith(f"| 43 | ElectLeaders | 0{DASH}2 | 0{DASH}2 | 2 | broker, controller |")
    assert "SASL listeners" in rows[17] and "SASL listeners" in rows[36]


def test_versions_are_written_as_runs() -> None:
    assert api_reference.versions_cell([3, 4, 5, 6]) == f"3{DASH}6"
    assert api_reference.versions_cell([5, 2]) == "2, 5"
    assert api_reference.versions_cell([0, 1, 2, 7]) == f"0{DASH}2, 7"
    assert api_reference.versions_cell([0]) == "0"
    assert api_reference.versions_cell([2, 5, 7], seed={5}) == "2, 5 (seed), 7"
    assert api_reference.versions_cell([3, 4, 5, 6], seed={4}) == f"3, 4 (seed), 5{DASH}6"


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
