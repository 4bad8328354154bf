"""The one table of which control-plane wire each inter.broker.protocol.version gives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from protocol import WireDialect
from protocol.ibp import DEFAULT_IBP, MIXED_CLUSTER_IBP, control_wire


@pytest.mark.parametrize(
    ("ibp", "dialect", "versions"),
    [
        ("2.2", WireDialect.KAFKA, (2, 5, 1, 2, 2)),
        ("2.3-IV1", WireDialect.KAFKA, (2, 5, 1, 2, 2)),
        ("2.3-IV2", WireDialect.SEED, (5, 7, 4, 2, 2)),
        ("2.8", WireDialect.SEED, (5, 7, 4, 2, 2)),
        ("3.3-IV3", WireDialect.SEED, (5, 7, 4, 2, 2)),
        ("3.4", WireDialect.KAFKA, (7, 8, 4, 2, 3)),
        ("3.5-IV0", WireDialect.KAFKA, (7, 8, 4, 2, 3)),
        ("3.5-IV1", WireDialect.KAFKA, (7, 8, 4, 3, 3)),
        ("3.9", WireDialect.KAFKA, (7, 8, 4, 3, 3)),
        ("3.9-IV0", WireDialect.KAFKA, (7, 8, 4, 3, 3)),
    ],
)
def test_each_ibp_gives_one_wire(ibp: str, dialect: WireDialect, versions: tuple[int, ...]) -> None:
    wire = control_wire(ibp)
    assert wire.dialect is dialect
    assert versions == (
        wire.leader_and_isr,
        wire.update_metadata,
        wire.stop_replica,
        wire.alter_partition,
        wire.controlled_shutdown,
    )
    assert wire.max_broker_epoch is (dialect is WireDialect.SEED)


def test_the_defaults_are_the_seeds_world_and_kafka_39_for_mixed_clusters() -> None:
    assert control_wire(DEFAULT_IBP).dialect is WireDialect.SEED
    assert control_wire(MIXED_CLUSTER_IBP).dialect is WireDialect.KAFKA


@pytest.mark.parametrize(
    ("ibp", "reason"), [("2.1", "KIP-380"), ("4.0", "no ZooKeeper mode"), ("three", "such as")]
)
def test_versions_without_a_wire_are_refused_with_the_reason(ibp: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        control_wire(ibp)


def test_the_protocol_page_draws_this_table() -> None:
    """docs/protocol.md's IBP table: each row's first and last IBP give the dialect and versions shown."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text(encoding="utf-8")
    rows = page.split("<!-- ibp -->")[1].split("<!-- /ibp -->")[0].strip().splitlines()[2:]
    assert len(rows) == 4
    for row in rows:
        ibps, dialect, sent, received, _ = (cell.strip() for cell in row.strip("|").split("|"))
        versions = tuple(int(v) for v in re.findall(r"v(\d+)", f"{sent} {received}"))
        for ibp in re.findall(r"`([0-9][^`]*)`", ibps):
            wire = control_wire(ibp)
            assert wire.dialect.name == dialect, ibp
            shown = (wire.leader_and_isr, wire.update_metadata, wire.stop_replica)
            assert versions == (*shown, wire.alter_partition, wire.controlled_shutdown), ibp
