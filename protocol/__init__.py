"""Sans-IO codec for the Kafka wire protocol: the control plane's APIs and the data plane's.

Bytes in, dicts out: nothing here touches a socket, a thread or ZooKeeper. Bodies are plain dicts
whose keys are the snake_case names of Apache Kafka's message fields; see docs/protocol.md. Where the
seeds reuse Kafka's version numbers for their own layouts, a ``WireDialect`` says which one is meant.
"""

from protocol.api import (
    CONTROL_APIS,
    DEFAULT_DIALECT,
    LEADER_DURING_DELETE,
    UNKNOWN_BROKER_EPOCH,
    ApiKey,
    ApiSpec,
    WireDialect,
)
from protocol.codec import (
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_request_body,
    encode_request_header,
    encode_response,
)
from protocol.error_codes import ErrorCode
from protocol.error_response import error_entries, error_response_body
from protocol.errors import CorruptRecordBatch, FrameTooLarge, ProtocolError, UnsupportedVersionError
from protocol.framing import DEFAULT_MAX_FRAME_SIZE, check_frame, frame_size
from protocol.headers import RequestHeader
from protocol.messages import (
    KAFKA_3_9_VERSIONS,
    MAX_BROKER_EPOCH_VERSIONS,
    PER_BROKER_EPOCH_VERSIONS,
    epoch_field,
    uses_max_broker_epoch,
)
from protocol.registry import (
    SUPPORTED_VERSIONS,
    SUPPORTED_VERSIONS_BY_DIALECT,
    is_supported,
    message_codec,
    supported_versions,
)
from protocol.types import Encoded

__all__ = [
    "CONTROL_APIS",
    "DEFAULT_DIALECT",
    "DEFAULT_MAX_FRAME_SIZE",
    "KAFKA_3_9_VERSIONS",
    "LEADER_DURING_DELETE",
    "MAX_BROKER_EPOCH_VERSIONS",
    "PER_BROKER_EPOCH_VERSIONS",
    "SUPPORTED_VERSIONS",
    "SUPPORTED_VERSIONS_BY_DIALECT",
    "UNKNOWN_BROKER_EPOCH",
    "ApiKey",
    "ApiSpec",
    "CorruptRecordBatch",
    "Encoded",
    "ErrorCode",
    "FrameTooLarge",
    "ProtocolError",
    "RequestHeader",
    "UnsupportedVersionError",
    "WireDialect",
    "check_frame",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_request_body",
    "encode_request_header",
    "encode_response",
    "epoch_field",
    "error_entries",
    "error_response_body",
    "frame_size",
    "is_supported",
    "message_codec",
    "supported_versions",
    "uses_max_broker_epoch",
]
