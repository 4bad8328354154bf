"""AdminFailure: an Admin API request (or one resource in it) refused with Kafka's error code."""

from __future__ import annotations

from placement.errors import AdminError
from protocol import ErrorCode

__all__ = ["AdminFailure", "admin_error"]


class AdminFailure(Exception):
    """A request refused with ``code``; the message goes to the client as the result's error message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def admin_error(exc: AdminError) -> AdminFailure:
    """Kafka's error code for a refusal of the shared admin code (its messages are Kafka's tools')."""
    return AdminFailure(ErrorCode[exc.kind] if exc.kind else ErrorCode.INVALID_REQUEST, str(exc))
