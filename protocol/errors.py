"""The one exception family the codec raises, so callers can close a connection on exactly that."""

from __future__ import annotations


class ProtocolError(Exception):
    """Bytes or a body that do not follow the wire format; the message names the field at fault."""


class FrameTooLarge(ProtocolError):
    """A size prefix above the configured maximum (``socket.request.max.bytes``) or below zero.

    Raised from the 4-byte prefix alone, before any buffer for the frame is allocated.
    """

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame size {size} is outside 0..{max_size} (socket.request.max.bytes)")
        self.size = size
        self.max_size = max_size


class UnsupportedVersionError(ProtocolError):
    """A request whose API key is known but whose version this codec does not implement.

    It carries what could be read of the header, so a server can answer UNSUPPORTED_VERSION on the
    right correlation id instead of closing the connection.
    """

    def __init__(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> None:
        super().__init__(f"API key {api_key} version {api_version} is not supported")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


class CorruptRecordBatch(ProtocolError):
    """A record-batch blob that is not well-formed v2 batches: bad magic, a length beyond the data or
    below the header, a CRC mismatch, or records that do not fit their batch.

    Kafka answers a produce request carrying one with CORRUPT_MESSAGE (2).
    """
