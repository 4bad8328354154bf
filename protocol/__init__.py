"""Sans-IO codec for the Kafka wire protocol: the control plane's APIs and the data plane's.

Bytes in, dicts out: nothing here touches a socket, a thread or ZooKeeper. Bodies are plain dicts
whose keys are the snake_case names of Apache Kafka's message fields; see docs/protocol.md.
"""

from protocol.api import CONTROL_APIS, LEADER_DURING_DELETE, UNKNOWN_BROKER_EPOCH, ApiKey, ApiSpec
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
from protocol.messages import MAX_BROKER_EPOCH_VERSIONS, PER_BROKER_EPOCH_VERSIONS, epoch_field
from protocol.registry import SUPPORTED_VERSIONS, is_supported, message_codec
from protocol.types import Encoded

__all__ = [
    "CONTROL_APIS",
    "DEFAULT_MAX_FRAME_SIZE",
    "LEADER_DURING_DELETE",
    "MAX_BROKER_EPOCH_VERSIONS",
    "PER_BROKER_EPOCH_VERSIONS",
    "SUPPORTED_VERSIONS",
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
]
