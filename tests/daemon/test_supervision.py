"""A long-running task that fails is logged by name and restarted, never left dead."""

from __future__ import annotations

import asyncio
import logging

import pytest

from daemon.supervision import start_supervised


async def test_a_failing_task_is_logged_by_name_and_restarted(caplog: pytest.LogCaptureFixture) -> None:
    runs = 0

    async def body() -> None:
        nonlocal runs
        runs += 1
        if runs < 3:
            raise RuntimeError(f"failure {runs}")

    with caplog.at_level(logging.ERROR, logger="daemon.supervision"):
        await asyncio.wait_for(start_supervised("sender-7", body, backoff_s=0.01), 5)
    assert runs == 3
    failures = [r for r in caplog.records if "sender-7" in r.getMessage()]
    assert len(failures) == 2 and all(r.exc_info for r in failures)


async def test_cancelling_a_supervised_task_ends_it() -> None:
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    task = start_supervised("idle", forever)
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
