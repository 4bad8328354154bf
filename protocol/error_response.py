"""Error-only response bodies for any implemented API version, derived from its schema.

A server that refuses a request (UNSUPPORTED_VERSION, an API not served on a listener) must still answer
with a body its peer can decode. Building it from the construct schema keeps that true for every API
and version without a hand-written error body per message.

Most data-plane responses have no top-level error code: Kafka reports a refused Produce, Fetch,
ListOffsets or OffsetForLeaderEpoch on every partition of the request, and a refused Metadata on every
requested topic; so it does for the transaction APIs without one (AddPartitionsToTxn, TxnOffsetCommit
and WriteTxnMarkers per partition, DescribeTransactions per transactional id). Given the request body,
:func:`error_response_body` does the same.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from construct import Construct, Flag, FormatField, Renamed

from protocol.api import DEFAULT_DIALECT, ApiKey, WireDialect
from protocol.registry import message_codec
from protocol.types import KArray, KBytes, KString, KStruct, KTaggedFields, Uuid, field_default

__all__ = ["error_entries", "error_response_body"]

_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class _Mirror:
    """Where one API's request lists its topics and partitions, and where its response answers them.

    ``*_partitions`` is None when the response answers per topic (Metadata); ``request_index`` is None
    when the request lists bare partition numbers (ElectLeaders, AddPartitionsToTxn, WriteTxnMarkers);
    ``response_error`` names the code's field (AddPartitionsToTxn's is ``partition_error_code``).
    """

    request_topics: str
    request_name: str
    request_partitions: str | None
    request_index: str | None
    response_topics: str
    response_name: str
    response_partitions: str | None
    response_index: str | None
    response_error: str = "error_code"


_MIRRORS: dict[int, _Mirror] = {
    ApiKey.PRODUCE: _Mirror(
        "topic_data", "name", "partition_data", "index", "responses", "name", "partition_responses", "index"
    ),
    ApiKey.FETCH: _Mirror(
        "topics", "topic", "partitions", "partition", "responses", "topic", "partitions", "partition_index"
    ),
    ApiKey.LIST_OFFSETS: _Mirror(
        "topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index"
    ),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _Mirror(
        "topics", "topic", "partitions", "partition", "topics", "topic", "partitions", "partition"
    ),
    ApiKey.METADATA: _Mirror("topics", "name", None, None, "topics", "name", None, None),
    ApiKey.OFFSET_COMMIT: _Mirror(
        "topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index"
    ),
    ApiKey.ELECT_LEADERS: _Mirror(
        "topic_partitions",
        "topic",
        "partitions",
        None,
        "replica_election_results",
        "topic",
        "partition_result",
        "partition_id",
    ),
    ApiKey.ADD_PARTITIONS_TO_TXN: _Mirror(
        "topics",
        "name",
        "partitions",
        None,
        "results_by_topic",
        "name",
        "results_by_partition",
        "partition_index",
        "partition_error_code",
    ),
    ApiKey.TXN_OFFSET_COMMIT: _Mirror(
        "topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index"
    ),
}

_MARKER_TOPICS = _Mirror(
    "topics", "name", "partition_indexes", None, "topics", "name", "partitions", "partition_index"
)
"""Where each marker of a WriteTxnMarkers request lists its partitions, and its result answers them."""


def _empty(con: Construct) -> Any:
    """The smallest valid value of ``con``: Kafka's declared default where the schema records one, else
    zero, false, empty, or null where a string allows it."""
    declared = field_default(con)
    if declared is not None:
        return declared
    while isinstance(con, Renamed):
        con = con.subcon
    if con is Flag:
        return False
    if isinstance(con, FormatField):
        return 0
    if con is Uuid:
        return _ZERO_UUID
    if isinstance(con, KString):
        return None if con.nullable else ""
    if isinstance(con, KBytes):
        return b""
    if isinstance(con, KArray):
        return []
    if isinstance(con, KStruct):
        return _empty_struct(con)
    raise TypeError(f"no empty value known for {con!r}")


def _empty_struct(con: KStruct) -> dict[str, Any]:
    """Every field of a struct at its empty value, tagged fields at their declared defaults."""
    empty = {sc.name: _empty(sc) for sc in con.subcons if sc.name}
    for sc in con.subcons:
        if isinstance(sc, KTaggedFields):
            empty.update(sc.defaults())
    return empty


def _element(struct_con: KStruct, name: str) -> KStruct:
    """The struct each element of the array field ``name`` holds."""
    (field,) = (sc for sc in struct_con.subcons if sc.name == name)
    while isinstance(field, Renamed):
        field = field.subcon
    element: KStruct = field.element
    return element


def _mirrored_topics(
    schema: KStruct, mirror: _Mirror, request: dict[str, Any], error_code: int, message: str | None
) -> list[dict[str, Any]]:
    topic_con = _element(schema, mirror.response_topics)
    topics = []
    for requested in request.get(mirror.request_topics) or ():
        topic = _empty(topic_con)
        if mirror.request_name in requested:
            topic[mirror.response_name] = requested[mirror.request_name]
        else:  # Fetch v13+ names topics by id, in its request and its response alike
            topic["topic_id"] = requested["topic_id"]
        if mirror.request_partitions is None or mirror.response_partitions is None:
            topic[mirror.response_error] = error_code
        else:
            partition_con = _element(topic_con, mirror.response_partitions)
            for requested_partition in requested[mirror.request_partitions]:
                partition = _empty(partition_con)
                partition[mirror.response_index] = (
                    requested_partition
                    if mirror.request_index is None
                    else requested_partition[mirror.request_index]
                )
                partition[mirror.response_error] = error_code
                if "error_message" in partition:
                    partition["error_message"] = message
                topic[mirror.response_partitions].append(partition)
        topics.append(topic)
    return topics


def _answer_markers(
    schema: KStruct, request: dict[str, Any], error_code: int, message: str | None
) -> dict[str, Any]:
    """WriteTxnMarkers: one result per marker, naming its producer, with every partition it lists."""
    marker_con = _element(schema, "markers")
    markers = []
    for requested in request.get("markers") or ():
        marker = _empty(marker_con)
        marker["producer_id"] = requested["producer_id"]
        marker["topics"] = _mirrored_topics(marker_con, _MARKER_TOPICS, requested, error_code, message)
        markers.append(marker)
    return {"markers": markers}


def _answer_transactional_ids(
    schema: KStruct, request: dict[str, Any], error_code: int, message: str | None
) -> dict[str, Any]:
    """DescribeTransactions: one state per requested transactional id, carrying the code."""
    state_con = _element(schema, "transaction_states")
    states = []
    for transactional_id in request.get("transactional_ids") or ():
        state = _empty(state_con)
        state["transactional_id"] = transactional_id
        state["error_code"] = error_code
        states.append(state)
    return {"transaction_states": states}


_ANSWERS: dict[int, Callable[[KStruct, dict[str, Any], int, str | None], dict[str, Any]]] = {
    ApiKey.WRITE_TXN_MARKERS: _answer_markers,
    ApiKey.DESCRIBE_TRANSACTIONS: _answer_transactional_ids,
}
"""APIs whose error answers list what was asked in a shape no ``_Mirror`` describes."""


def error_response_body(
    api_key: int,
    api_version: int,
    error_code: int,
    request: dict[str, Any] | None = None,
    *,
    message: str | None = None,
    dialect: WireDialect = DEFAULT_DIALECT,
) -> dict[str, Any]:
    """A response body for ``api_key`` v``api_version`` carrying ``error_code`` and nothing else.

    The code goes into the top-level ``error_code`` field where the version has one. With the decoded
    ``request`` body, Produce, Fetch, ListOffsets and OffsetForLeaderEpoch answers also list every
    requested partition with the code, ElectLeaders every requested partition, and Metadata every
    requested topic, as Kafka's error responses do; so do AddPartitionsToTxn, TxnOffsetCommit and
    WriteTxnMarkers (per marker) for every partition, and DescribeTransactions for every transactional
    id. Without the request those lists are empty. ``message`` goes wherever the version has an
    ``error_message`` beside the code. Other fields take Kafka's declared defaults (-1 offsets and
    epochs, for example) or zeros.

    Raises ProtocolError for an API or version the codec does not implement in ``dialect``.
    """
    schema = message_codec(api_key, api_version, "response", dialect).schema
    body: dict[str, Any] = _empty(schema)
    if "error_code" in body:
        body["error_code"] = error_code
    if "error_message" in body:
        body["error_message"] = message
    mirror = _MIRRORS.get(api_key)
    if request is not None and mirror is not None:
        body[mirror.response_topics] = _mirrored_topics(schema, mirror, request, error_code, message)
    answer = _ANSWERS.get(api_key)
    if request is not None and answer is not None:
        body.update(answer(schema, request, error_code, message))
    return body


def error_entries(
    api_key: int,
    api_version: int,
    list_field: str,
    entries: list[dict[str, Any]],
    error_code: int,
    *,
    dialect: WireDialect = DEFAULT_DIALECT,
) -> list[dict[str, Any]]:
    """Elements of the response's array ``list_field``, each carrying ``error_code`` and the given keys.

    For answers that list one result per named resource (CreateTopics' topics, DeleteGroups' results,
    DescribeConfigs' results): every field the caller does not give takes its declared default.
    """
    schema = message_codec(api_key, api_version, "response", dialect).schema
    element = _element(schema, list_field)
    out = []
    for given in entries:
        entry = _empty(element)
        entry.update(given)
        entry["error_code"] = error_code
        out.append(entry)
    return out
