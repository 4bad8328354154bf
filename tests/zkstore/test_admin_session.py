"""An admin command's ZooKeeper session: an unreachable server is one clear error."""

from __future__ import annotations

import pytest

from placement.errors import AdminError
from zkstore import admin_session

pytestmark = pytest.mark.zookeeper


async def test_unreachable_zookeeper_is_one_clear_error() -> None:
    with pytest.raises(AdminError, match=r"cannot connect to ZooKeeper at 127\.0\.0\.1:1 "):
        async with admin_session.connect("127.0.0.1:1", timeout_s=0.5):
            pass
