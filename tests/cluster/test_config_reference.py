"""docs/configuration.md is generated from the key declarations and must not drift from them."""

from __future__ import annotations

import pytest

from cluster import config_reference
from daemon.config import REQUIRED, ConfigKey, reference_table


def test_the_committed_page_matches_the_declared_keys() -> None:
    page = config_reference.PAGE.read_text(encoding="utf-8")
    assert config_reference.render(page) == page, "run: python -m cluster.config_reference"


@pytest.mark.parametrize("daemon", sorted(config_reference.TABLES))
def test_every_key_says_what_it_does(daemon: str) -> None:
    undocumented = [key.name for key in config_reference.TABLES[daemon] if not key.doc]
    assert not undocumented


def test_a_page_without_its_markers_is_an_error_not_a_silent_no_op() -> None:
    with pytest.raises(ValueError, match="keys:controller"):
        config_reference.render("# Configuration\n")


def test_check_mode_fails_on_a_stale_page(tmp_path) -> None:
    page = tmp_path / "configuration.md"
    stale = "".join(
        f"<!-- keys:{name} -->\n| old |\n<!-- /keys:{name} -->\n" for name in config_reference.TABLES
    )
    page.write_text(stale)
    assert config_reference.main(["--check", "--page", str(page)]) == 1
    assert config_reference.main(["--page", str(page)]) == 0
    assert config_reference.main(["--check", "--page", str(page)]) == 0


def test_the_table_shows_defaults_as_configured_and_the_environment_variable() -> None:
    table = reference_table(
        [
            ConfigKey("broker.id", "int", REQUIRED, doc="id"),
            ConfigKey("controlled.shutdown.enable", "bool", True, doc="on"),
            ConfigKey("listeners", "list", ["A://h:1", "B://h:2"], doc="all"),
            ConfigKey("metrics.port", "int", None, doc="port"),
            ConfigKey("log.dirs", "list", None, doc="dirs", shown_default="`/tmp/x`", aliases=("log.dir",)),
        ]
    ).splitlines()
    assert table[2] == "| `broker.id`<br>`KAFKA_BROKER_ID` | required | id |"
    assert table[3].split(" | ")[1] == "`true`"
    assert table[4].split(" | ")[1] == "`A://h:1,B://h:2`"
    assert table[5].split(" | ")[1] == "unset"
    assert table[6] == "| `log.dirs` (alias `log.dir`)<br>`KAFKA_LOG_DIRS` | `/tmp/x` | dirs |"
