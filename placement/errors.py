"""AdminError: a request refused as Kafka's admin tools refuse it, with the message to show.

It lives on the lowest floor that raises it: placement's checks refuse first, and ``zkstore/``'s admin
modules, the brokers' Admin API and the CLI raise and catch the same class.
"""

from __future__ import annotations

__all__ = ["AdminError"]


class AdminError(Exception):
    """A request refused as Kafka's admin tools refuse it; the message is meant for the user.

    ``kind`` names the Kafka error the Admin API answers it with (``TOPIC_ALREADY_EXISTS``, ...), when
    one fits; the brokers send INVALID_REQUEST otherwise."""

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
