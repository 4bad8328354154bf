"""Requests whose work runs on the broker's event loop, answered from the handler threads."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

log = logging.getLogger("broker")

T = TypeVar("T")
Body = dict[str, Any]


def answer_on_loop(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T], answer: Callable[[T], Body], what: str
) -> Future[Body]:
    """Run ``coro`` on ``loop`` and make its result the response body; the handler thread returns the
    future at once. A failure fails the future, which closes the connection with the reason rather
    than leave the client waiting."""
    done = asyncio.run_coroutine_threadsafe(coro, loop)
    out: Future[Body] = Future()

    def finish(f: Future[T]) -> None:
        try:
            out.set_result(answer(f.result()))
        except Exception as exc:
            log.exception("%s failed", what)
            out.set_exception(exc)

    done.add_done_callback(finish)
    return out
