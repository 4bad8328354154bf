"""Kafka's wire types as construct classes: the vocabulary every message schema is declared in.

Fixed-width integers and booleans are construct's own (big-endian, signed). The classes here add what
Kafka needs on top: int16-length and compact strings, int32-length and compact byte strings (``bytes``
and ``records``), int32-count and compact arrays, UUIDs and the tagged-field section of flexible
versions, with the tagged fields a version declares. Each validates lengths and counts against the bytes that
remain *before* reading or allocating, so hostile input fails with a ``ConstructError`` naming the
field path instead of a huge allocation or a raw ``IndexError``.

Every struct is a :class:`KStruct`, which parses into a plain ``dict``: that is the contract at the
codec's edge, and it spares a conversion pass over large messages.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterable
from typing import Any

from construct import (
    Construct,
    ConstructError,
    Flag,
    FormatField,
    Int8sb,
    Int16sb,
    Int32sb,
    Int64sb,
    Renamed,
    Struct,
    stream_read,
    stream_size,
    stream_tell,
    stream_write,
)

__all__ = [
    "Bool",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "KArray",
    "KBytes",
    "KString",
    "KStruct",
    "KTaggedFields",
    "Layout",
    "Schema",
    "TaggedFields",
    "Uuid",
    "WireError",
    "default",
    "field_default",
    "min_size",
    "only",
    "read_uvarint",
    "tagged",
    "uvarint_bytes",
]

Int8 = Int8sb
Int16 = Int16sb
Int32 = Int32sb
Int64 = Int64sb
Bool = Flag
"""One byte; any non-zero value reads as true, as Kafka's ``readByte() != 0`` does."""

Schema = Construct

_MAX_UVARINT32_BYTES = 5


class WireError(ConstructError):
    """A Kafka-specific framing violation found while parsing or building (bad length, count, UTF-8)."""


def _remaining(stream: Any, path: str) -> int:
    remaining: int = stream_size(stream) - stream_tell(stream, path)
    return remaining


def read_uvarint(stream: Any, path: str) -> int:
    """An unsigned LEB128 varint of at most 32 bits, as Kafka's compact lengths and tags use."""
    value = 0
    for i in range(_MAX_UVARINT32_BYTES):
        byte: int = stream_read(stream, 1, path)[0]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if value > 0xFFFFFFFF:
                raise WireError(f"unsigned varint {value} exceeds 32 bits", path=path)
            return value
    raise WireError(f"unsigned varint longer than {_MAX_UVARINT32_BYTES} bytes", path=path)


def uvarint_bytes(value: int) -> bytes:
    """Encode a non-negative int below 2**32 as an unsigned LEB128 varint."""
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"unsigned varint {value} out of range")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _LengthPrefixed(Construct):
    """Shared length/count prefix handling: int16 or int32 (classic) vs unsigned varint (compact)."""

    classic: Construct

    def __init__(self, *, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.compact = compact
        self.nullable = nullable

    def _read_length(self, stream: Any, context: Any, path: str) -> int | None:
        if self.compact:
            n = read_uvarint(stream, path) - 1
        else:
            n = self.classic._parsereport(stream, context, path)
        if n == -1 and self.nullable:
            return None
        if n < 0:
            raise WireError(f"invalid length {n}", path=path)
        return n

    def _write_length(self, n: int | None, stream: Any, context: Any, path: str) -> None:
        if n is None:
            if not self.nullable:
                raise WireError("null given for a non-nullable field", path=path)
            n = -1
        if self.compact:
            stream_write(stream, uvarint_bytes(n + 1), len(uvarint_bytes(n + 1)), path)
        else:
            self.classic._build(n, stream, context, path)


class KString(_LengthPrefixed):
    """Kafka ``string``: int16 length (compact: uvarint length+1), UTF-8, -1 for null where allowed."""

    classic = Int16sb

    def __init__(self, *, compact: bool = False, nullable: bool = False) -> None:
        super().__init__(compact=compact, nullable=nullable)

    def _parse(self, stream: Any, context: Any, path: str) -> str | None:
        n = self._read_length(stream, context, path)
        if n is None:
            return None
        if n > _remaining(stream, path):
            raise WireError(f"string length {n} exceeds the {_remaining(stream, path)} bytes left", path=path)
        raw: bytes = stream_read(stream, n, path)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WireError(f"invalid UTF-8: {exc.reason} at byte {exc.start}", path=path) from None

    def _build(self, obj: str | None, stream: Any, context: Any, path: str) -> str | None:
        if obj is None:
            self._write_length(None, stream, context, path)
            return obj
        if not isinstance(obj, str):
            raise WireError(f"expected str, got {type(obj).__name__}", path=path)
        try:
            raw = obj.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise WireError(f"cannot encode as UTF-8: {exc.reason}", path=path) from None
        if not self.compact and len(raw) > 0x7FFF:
            raise WireError(f"string of {len(raw)} bytes exceeds the int16 length limit", path=path)
        self._write_length(len(raw), stream, context, path)
        stream_write(stream, raw, len(raw), path)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        raise ConstructError("a string has no fixed size", path=path)


class KBytes(_LengthPrefixed):
    """Kafka ``bytes`` and ``records``: int32 length (compact: uvarint length+1), raw, -1 for null.

    ``records`` stays opaque here: a broker stores and serves record batches as they arrived, so the
    codec never parses them (``protocol.record_batch`` does, when asked). Building accepts any
    contiguous buffer (``bytes``, ``bytearray``, ``memoryview``); parsing returns ``bytes``.
    """

    classic = Int32sb

    def __init__(self, *, compact: bool = False, nullable: bool = False) -> None:
        super().__init__(compact=compact, nullable=nullable)

    def _parse(self, stream: Any, context: Any, path: str) -> bytes | None:
        n = self._read_length(stream, context, path)
        if n is None:
            return None
        if n > _remaining(stream, path):
            raise WireError(f"bytes length {n} exceeds the {_remaining(stream, path)} bytes left", path=path)
        data: bytes = stream_read(stream, n, path)
        return data

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        if obj is None:
            self._write_length(None, stream, context, path)
            return obj
        if not isinstance(obj, (bytes, bytearray, memoryview)):
            raise WireError(f"expected bytes, got {type(obj).__name__}", path=path)
        try:
            raw = obj if isinstance(obj, bytes) else memoryview(obj).cast("B").tobytes()
        except TypeError as exc:
            raise WireError(f"unusable buffer: {exc}", path=path) from None
        if len(raw) > 0x7FFFFFFF:
            raise WireError(f"{len(raw)} bytes exceed the int32 length limit", path=path)
        self._write_length(len(raw), stream, context, path)
        stream_write(stream, raw, len(raw), path)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        raise ConstructError("a byte string has no fixed size", path=path)


class Encoded(bytes):
    """An array element encoded ahead of time (by ``MessageCodec.element_encoder``); written as is.

    Lets a handler encode a big response piece by piece, such as a Metadata response topic by
    topic, pausing between pieces, instead of building every element's dict before one long encode.
    """

    __slots__ = ()


class KArray(_LengthPrefixed):
    """Kafka array: int32 count (compact: uvarint count+1) of ``element``, -1 for null where allowed."""

    classic = Int32sb

    def __init__(self, element: Construct, *, compact: bool = False, nullable: bool = False) -> None:
        super().__init__(compact=compact, nullable=nullable)
        self.element = element
        self.element_min_size = min_size(element)

    def _parse(self, stream: Any, context: Any, path: str) -> list[Any] | None:
        n = self._read_length(stream, context, path)
        if n is None:
            return None
        left = _remaining(stream, path)
        if n * self.element_min_size > left:
            raise WireError(f"array count {n} cannot fit in the {left} bytes left", path=path)
        element = self.element
        return [element._parsereport(stream, context, f"{path}[{i}]") for i in range(n)]

    def _build(self, obj: Iterable[Any] | None, stream: Any, context: Any, path: str) -> Any:
        if obj is None:
            self._write_length(None, stream, context, path)
            return obj
        if isinstance(obj, (str, bytes, dict)) or not isinstance(obj, Iterable):
            raise WireError(f"expected a list, got {type(obj).__name__}", path=path)
        items = list(obj)
        self._write_length(len(items), stream, context, path)
        for i, item in enumerate(items):
            if type(item) is Encoded:
                stream.write(item)
            else:
                self.element._build(item, stream, context, f"{path}[{i}]")
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        raise ConstructError("an array has no fixed size", path=path)


class _Uuid(Construct):
    """Kafka ``uuid``: 16 raw bytes, as a :class:`uuid.UUID`."""

    def _parse(self, stream: Any, context: Any, path: str) -> uuid.UUID:
        return uuid.UUID(bytes=stream_read(stream, 16, path))

    def _build(self, obj: uuid.UUID, stream: Any, context: Any, path: str) -> uuid.UUID:
        if not isinstance(obj, uuid.UUID):
            raise WireError(f"expected uuid.UUID, got {type(obj).__name__}", path=path)
        stream_write(stream, obj.bytes, 16, path)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        return 16


Uuid = _Uuid()


class KTaggedFields(Construct):
    """The tagged-field section closing every struct of a flexible version.

    ``fields`` are the tagged fields the version declares (each made with :func:`tagged`): parsing
    puts each into the enclosing struct's dict, its declared default when the tag is absent, and skips
    unknown tags after validating the section's framing (as Kafka keeps them aside); building writes,
    in ascending tag order, those whose value differs from the default (as Kafka's generated code does),
    a missing key counting as the default. ``TaggedFields`` is the section with no known field.
    """

    def __init__(self, *fields: Renamed) -> None:
        super().__init__()
        self.flagbuildnone = True
        for field in fields:
            if getattr(field, "kafka_tag", None) is None:
                raise TypeError(f"{field!r} is not a tagged field")
        self.fields: tuple[Renamed, ...] = tuple(sorted(fields, key=lambda f: f.kafka_tag))
        self._by_tag: dict[int, Renamed] = {f.kafka_tag: f for f in self.fields}

    def defaults(self) -> dict[str, Any]:
        """Each known field's name and declared default: what the section holds when it is empty (a
        struct's or an array's default copied, so that a body's value is never the shared default)."""
        values = {f.name: field_default(f) for f in self.fields}
        return {k: v.copy() if isinstance(v, (dict, list)) else v for k, v in values.items()}

    def _parse(self, stream: Any, context: Any, path: str) -> dict[str, Any]:
        path = f"{path} -> _tagged_fields"
        values = self.defaults()
        count = read_uvarint(stream, path)
        if count > _remaining(stream, path) // 2:
            raise WireError(f"tagged field count {count} cannot fit in the bytes left", path=path)
        previous = -1
        for _ in range(count):
            tag = read_uvarint(stream, path)
            if tag <= previous:
                raise WireError(f"tag {tag} not in ascending order after {previous}", path=path)
            previous = tag
            size = read_uvarint(stream, path)
            if size > _remaining(stream, path):
                raise WireError(f"tag {tag} size {size} exceeds the bytes left", path=path)
            data: bytes = stream_read(stream, size, path)
            field = self._by_tag.get(tag)
            if field is not None:
                values[field.name] = _parse_exactly(field, data, context, f"{path} -> {field.name}")
        return values

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> None:
        given: dict[str, Any] = obj if isinstance(obj, dict) else {}
        present = []
        for field in self.fields:
            default = field_default(field)
            value = given.get(field.name, default)
            if value != default:
                piece = io.BytesIO()
                field.subcon._build(value, piece, context, f"{path} -> {field.name}")
                present.append((field.kafka_tag, piece.getvalue()))
        out = bytearray(uvarint_bytes(len(present)))
        for tag, data in present:
            out += uvarint_bytes(tag) + uvarint_bytes(len(data)) + data
        stream_write(stream, bytes(out), len(out), path)
        return None

    def _sizeof(self, context: Any, path: str) -> int:
        raise ConstructError("a tagged-field section has no fixed size", path=path)


def _parse_exactly(field: Renamed, data: bytes, context: Any, path: str) -> Any:
    """A tagged field's value from exactly the bytes its tag announced."""
    stream = io.BytesIO(data)
    value = field.subcon._parsereport(stream, context, path)
    if stream.tell() != len(data):
        raise WireError(f"{len(data) - stream.tell()} bytes left over in the tagged field", path=path)
    return value


TaggedFields = KTaggedFields()
"""The tagged-field section of a struct that declares no tagged field."""


def tagged(tag: int, field: Renamed, default: Any) -> Renamed:
    """A tagged field (``"tag": N`` in Kafka's JSON spec), written where the spec lists it:
    ``Layout.struct`` moves it into the struct's tagged-field section, and bodies carry it under its
    name like any other field."""
    field.kafka_tag = tag
    field.kafka_default = default
    return field


class KStruct(Struct):
    """A struct that parses into a plain ``dict`` of its named fields and builds from any mapping.

    No ``this``-expressions are used by Kafka's schemas (lengths are inline prefixes), so the
    context bookkeeping of construct's ``Struct`` is skipped.
    """

    def _parse(self, stream: Any, context: Any, path: str) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for sc in self.subcons:
            value = sc._parsereport(stream, context, path)
            if sc.name:
                obj[sc.name] = value
            elif isinstance(sc, KTaggedFields):
                obj.update(value)
        return obj

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        if not isinstance(obj, dict):
            raise WireError(f"expected a dict, got {type(obj).__name__}", path=path)
        for sc in self.subcons:
            if sc.name is None:
                sc._build(obj if isinstance(sc, KTaggedFields) else None, stream, context, path)
                continue
            try:
                value = obj[sc.name]
            except KeyError:
                raise WireError(f"missing field {sc.name!r}", path=path) from None
            sc._build(value, stream, context, path)
        return obj


def min_size(con: Construct) -> int:
    """The fewest bytes ``con`` can occupy on the wire, used to bound counts before allocating."""
    if isinstance(con, Renamed):
        return min_size(con.subcon)
    if isinstance(con, Struct):
        return sum(min_size(sc) for sc in con.subcons)
    if isinstance(con, _LengthPrefixed):
        return 1 if con.compact else con.classic.sizeof()
    if isinstance(con, KTaggedFields):
        return 1
    if isinstance(con, FormatField) or con is Flag or con is Uuid:
        size: int = con.sizeof()
        return size
    raise TypeError(f"no minimum size known for {con!r}")


class Layout:
    """Builds a version's strings, arrays and structs in its encoding: classic or flexible (compact).

    A message schema is then written once, as a function of its version, in Kafka's field order::

        k = Layout(flexible=version >= 2)
        k.struct("topic_name" / k.string(), "partitions" / k.array(Int32))
    """

    def __init__(self, *, flexible: bool) -> None:
        self.flexible = flexible

    def string(self, *, nullable: bool = False) -> KString:
        return KString(compact=self.flexible, nullable=nullable)

    def bytes(self, *, nullable: bool = False) -> KBytes:
        """Kafka ``bytes``, and ``records`` (the same encoding, holding record batches)."""
        return KBytes(compact=self.flexible, nullable=nullable)

    def array(self, element: Construct, *, nullable: bool = False) -> KArray:
        return KArray(element, compact=self.flexible, nullable=nullable)

    def struct(self, *fields: Construct) -> KStruct:
        """A struct of ``fields`` in spec order; flexible versions close it with the tagged-field
        section, into which the fields made with :func:`tagged` move."""
        if not self.flexible:
            if any(getattr(f, "kafka_tag", None) is not None for f in fields):
                raise TypeError("tagged fields exist only in flexible versions")
            return KStruct(*fields)
        plain = [f for f in fields if getattr(f, "kafka_tag", None) is None]
        known = [f for f in fields if getattr(f, "kafka_tag", None) is not None]
        return KStruct(*plain, KTaggedFields(*known) if known else TaggedFields)


def only(condition: bool, *fields: Construct) -> tuple[Construct, ...]:
    """Fields present only in some versions: ``*only(version >= 1, "is_new" / Bool)``."""
    return fields if condition else ()


def default(field: Renamed, value: Any) -> Renamed:
    """Record the default Kafka declares for a named field (``"default": "-1"`` in its JSON spec).

    Error responses read it (``protocol.error_response``): a client reads ``controller_id`` 0 or
    ``high_watermark`` 0 as real values, while -1 means "unknown", as Kafka's own error responses say.
    The wire format does not change (except for tagged fields, see :func:`tagged`).
    """
    field.kafka_default = value
    return field


def field_default(field: Construct) -> Any | None:
    """The default recorded by :func:`default` or :func:`tagged`, or None when the field has none."""
    return getattr(field, "kafka_default", None)
