"""Keeps the API table of ``docs/protocol.md`` equal to the codec and the daemons' handler tables.

Every API the codec implements (``protocol.registry.APIS``) is one row: its key and name, the versions
implemented in each wire dialect (KAFKA and SEED, the seed's own layouts marked) and those of Kafka's
that are flexible, the daemons that serve it, and notes. Who serves what
is read off the handler tables of daemons built (never started) in a scratch directory: the API keys a
broker's ``KafkaApis`` handles and those the controller's RPC listener serves. The notes come from the
codec's and the daemons' tables too: the control plane (``CONTROL_APIS``), KIP-380's per-broker-epoch
versions, seed 002's max-broker-epoch variants and the versions Kafka 3.9 sends, the Admin API
requests brokers forward to the controller, and the requests a SASL listener answers while a
connection authenticates.
``python -m cluster.api_reference`` rewrites the table in place; ``--check`` fails when it differs.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from broker.apis import ADVERTISED_MAX_VERSIONS
from cluster.doc_pages import page_command
from protocol import (
    CONTROL_APIS,
    KAFKA_3_9_VERSIONS,
    MAX_BROKER_EPOCH_VERSIONS,
    PER_BROKER_EPOCH_VERSIONS,
    ApiKey,
    WireDialect,
)
from protocol.api import ApiSpec
from protocol.registry import APIS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
BLOCK = re.compile(r"(<!-- apis -->\n)(?:.*?\n)?(<!-- /apis -->)", re.S)
AUTHENTICATION_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
"""What a SASL listener of either daemon answers before a connection has authenticated
(``network/handshake.py``)."""


@dataclass(frozen=True)
class Served:
    """The API keys each daemon's handler table holds."""

    broker: frozenset[int]
    controller: frozenset[int]
    forwarded: frozenset[int]
    """Admin API requests a broker takes and passes on to the active controller."""
    clients: frozenset[int] = frozenset()
    """What the controller answers clients of Kafka brokers that take it for a broker."""


def served(scratch: Path) -> Served:
    """The handler tables of a broker built (never started) in ``scratch`` and of the controller's RPC
    listener."""
    from broker.config import load as broker_config
    from broker.server import BrokerServer
    from controller.client_apis import CLIENT_APIS
    from controller.daemon import FORWARDED_APIS, RPC_APIS

    broker = BrokerServer(
        broker_config(
            None,
            {
                "KAFKA_BROKER_ID": "1",
                "KAFKA_ZOOKEEPER_CONNECT": "127.0.0.1:1",  # nothing connects: the broker is only built
                "KAFKA_LOG_DIRS": str(scratch / "logs"),
            },
        )
    )
    broker.events.close()
    return Served(
        broker=frozenset(broker.apis.api_keys),
        controller=frozenset(RPC_APIS),
        forwarded=frozenset(FORWARDED_APIS),
        clients=frozenset(CLIENT_APIS),
    )


def versions_cell(versions: Sequence[int], seed: Collection[int] = ()) -> str:
    """``3-8`` (an en dash) for a run, ``2, 5`` for apart ones, an em dash for none; each of ``seed``
    (the seed's own layouts) stands alone, marked ``5 (seed)``."""
    runs: list[list[int]] = []
    for version in sorted(versions):
        if runs and version == runs[-1][-1] + 1 and version not in seed and runs[-1][-1] not in seed:
            runs[-1].append(version)
        else:
            runs.append([version])
    parts = [
        (f"{run[0]} (seed)" if run[0] in seed else str(run[0]))
        if len(run) == 1
        else f"{run[0]}\N{EN DASH}{run[-1]}"
        for run in runs
    ]
    return ", ".join(parts) or "—"


def dialect_cell(spec: ApiSpec, dialect: WireDialect) -> str:
    """The versions ``spec`` implements in ``dialect``, the seed's own layouts marked."""
    versions = spec.versions_in(dialect)
    return versions_cell(versions, {v for v in versions if spec.is_seed_layout(v, dialect)})


def _served_by(key: int, served: Served) -> str:
    daemons = [
        name for name, keys in (("broker", served.broker), ("controller", served.controller)) if key in keys
    ]
    return ", ".join(daemons) or "—"


def _controller_notes(key: int, served: Served) -> list[str]:
    """Who sends the controller this request."""
    if key in served.forwarded:
        return ["forwarded by the broker to the active controller; Kafka's clients send it there directly"]
    if key in served.clients:
        return ["also answered by the controller to clients of Kafka 3.9 brokers"]
    if key in served.controller:
        return ["broker → active controller"]
    return []


def _notes(key: int, served: Served) -> list[str]:
    notes = []
    if key in CONTROL_APIS:
        notes.append("control plane: controller → broker")
    if key in PER_BROKER_EPOCH_VERSIONS:
        notes.append(f"v{PER_BROKER_EPOCH_VERSIONS[ApiKey(key)]}: Apache Kafka's, `broker_epoch` (KIP-380)")
    if key in MAX_BROKER_EPOCH_VERSIONS:
        version = MAX_BROKER_EPOCH_VERSIONS[ApiKey(key)]
        notes.append(f"v{version} (seed): seed 002's variant, `max_broker_epoch`, SEED dialect only")
    notes += _controller_notes(key, served)
    if key in KAFKA_3_9_VERSIONS:
        version = KAFKA_3_9_VERSIONS[ApiKey(key)]
        only = ", KAFKA dialect only" if MAX_BROKER_EPOCH_VERSIONS.get(ApiKey(key)) == version else ""
        notes.append(f"v{version}: Apache Kafka's{only}, what Kafka 3.9 sends (IBP 3.9)")
    if key in ADVERTISED_MAX_VERSIONS:
        notes.append(
            f"ApiVersions offers clients up to v{ADVERTISED_MAX_VERSIONS[key]}; the later versions serve "
            "Apache Kafka's replica fetchers, which name theirs from their IBP without negotiating"
        )
    if key == ApiKey.API_VERSIONS:
        notes.append("also answered by either daemon's SASL listeners while a connection authenticates")
    elif key in AUTHENTICATION_APIS:
        notes.append(
            "the SASL exchange: run by either daemon's SASL listeners while a connection authenticates "
            "(`network/handshake.py`)"
        )
    return notes


def table(served: Served, apis: Collection[int] = tuple(APIS)) -> str:
    """The markdown table of every API in ``apis``, by key."""
    rows = [
        "| key | API | KAFKA dialect | SEED dialect | flexible | served by | notes |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key in sorted(apis):
        spec = APIS[key]
        flexible = versions_cell(sorted(spec.flexible_versions)) if spec.flexible_versions else "no"
        notes = "; ".join(_notes(key, served)) or "—"
        rows.append(
            f"| {key} | {spec.name} | {dialect_cell(spec, WireDialect.KAFKA)} "
            f"| {dialect_cell(spec, WireDialect.SEED)} | {flexible} "
            f"| {_served_by(key, served)} | {notes} |"
        )
    return "\n".join(rows)


def render(page: str, content: str) -> str:
    """``page`` with its marked API table replaced; ValueError if the markers are missing."""
    if not BLOCK.search(page):
        raise ValueError("no <!-- apis --> … <!-- /apis --> block")
    return BLOCK.sub(lambda block: block.group(1) + content + "\n" + block.group(2), page)


def current_table() -> str:
    with tempfile.TemporaryDirectory(prefix="api-reference-") as scratch:
        return table(served(Path(scratch)))


def main(argv: list[str] | None = None) -> int:
    return page_command(
        "cluster.api_reference", __doc__, PAGE, lambda text: render(text, current_table()), argv
    )


if __name__ == "__main__":
    sys.exit(main())
