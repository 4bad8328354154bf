"""Hypothesis strategies derived from the construct schemas, so every message version is covered."""

from __future__ import annotations

from typing import Any

from construct import Construct, Flag, FormatField, Renamed
from hypothesis import settings
from hypothesis import strategies as st

from protocol import DEFAULT_DIALECT, WireDialect
from protocol.registry import APIS
from protocol.types import KArray, KBytes, KString, KStruct, KTaggedFields, Uuid

ALL_MESSAGES: list[tuple[int, int, str, WireDialect]] = [
    *(
        (int(spec.key), version, kind, DEFAULT_DIALECT)
        for spec in APIS.values()
        for version in spec.versions_in(DEFAULT_DIALECT)
        for kind in ("request", "response")
    ),
    *(
        (int(spec.key), version, kind, WireDialect.KAFKA)
        for spec in APIS.values()
        for version in spec.versions
        if spec.is_seed_layout(version, DEFAULT_DIALECT)
        for kind in ("request", "response")
    ),
]
"""Every distinct message layout, as (API key, version, kind, dialect): every version of the default
(SEED) dialect, then Kafka's layouts of the numbers the seed gives its own (StopReplica v4)."""


MESSAGE_EXAMPLES_DIVISOR = 12

per_message = settings(max_examples=max(5, settings.default.max_examples // MESSAGE_EXAMPLES_DIVISOR))
"""Settings for a test run once per message version: the profile's budget, shared out (see conftest)."""


def message_id(case: tuple[int, int, str] | tuple[int, int, str, WireDialect]) -> str:
    key, version, kind = case[:3]
    dialect = case[3] if len(case) > 3 else DEFAULT_DIALECT
    if APIS[key].seed is not None and version in APIS[key].versions_in(dialect):
        origin = "seed" if APIS[key].is_seed_layout(version, dialect) else "kafka"
        return f"{APIS[key].name}-v{version}-{origin}-{kind}"
    return f"{APIS[key].name}-v{version}-{kind}"


_INT_BITS = {"b": 8, "h": 16, "l": 32, "i": 32, "q": 64}


def body_strategy(
    con: Construct, max_items: int = 4, int_items: tuple[int, int] = (0, 4)
) -> st.SearchStrategy[Any]:
    """Valid values for ``con``: any body this strategy draws must encode and decode back unchanged.

    ``max_items`` bounds arrays of structs and strings; ``int_items`` bounds arrays of integers, so a
    test can force the long integer arrays that large clusters have.
    """
    while isinstance(con, Renamed):
        con = con.subcon
    if con is Flag:
        return st.booleans()
    if isinstance(con, FormatField):
        bits = _INT_BITS[con.fmtstr[1:]]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if con is Uuid:
        return st.uuids()
    if isinstance(con, KString):
        text = st.text(max_size=12)
        return st.none() | text if con.nullable else text
    if isinstance(con, KBytes):
        blob = st.binary(max_size=24)
        return st.none() | blob if con.nullable else blob
    if isinstance(con, KArray):
        return _array_strategy(con, max_items, int_items)
    if isinstance(con, KStruct):
        fields = {
            sc.name: body_strategy(sc, max_items, int_items) for sc in con.subcons if sc.name is not None
        }
        for section in (sc for sc in con.subcons if isinstance(sc, KTaggedFields)):
            fields.update({f.name: body_strategy(f, max_items, int_items) for f in section.fields})
        return st.fixed_dictionaries(fields)
    raise TypeError(f"no strategy for {con!r}")


def _array_strategy(con: KArray, max_items: int, int_items: tuple[int, int]) -> st.SearchStrategy[Any]:
    element = con.element
    while isinstance(element, Renamed):
        element = element.subcon
    low, high = int_items if isinstance(element, FormatField) else (0, max_items)
    items = st.lists(body_strategy(element, max_items, int_items), min_size=low, max_size=high)
    return st.none() | items if con.nullable else items
