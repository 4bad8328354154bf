"""Every event kind the daemons and the chaos tool emit is documented in docs/events.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.event_logs import emitted

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("package", ["broker", "controller", "chaos"])
def test_every_emitted_kind_is_documented(package: str) -> None:
    documented = set(re.findall(r"`([a-z_]+)`", (REPO / "docs" / "events.md").read_text()))
    kinds = emitted(package)
    assert kinds, f"no emit calls found in {package}/"
    assert sorted(kinds - documented) == []
