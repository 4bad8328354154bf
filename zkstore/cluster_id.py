"""The cluster's id in ``/cluster/id``: read, or created on first use as Kafka's brokers do."""

from __future__ import annotations

import contextlib
import json
import logging
import uuid

from kazoo.exceptions import NodeExistsError

from zkstore import znodes
from zkstore.aio import AsyncZooKeeper

log = logging.getLogger("zkstore.cluster_id")

CLUSTER_ID = "/cluster/id"


async def read_cluster_id(zk: AsyncZooKeeper) -> str:
    """The id ``/cluster/id`` holds, which this call creates (``{"version":"1","id":...}``) when absent."""
    await zk.ensure_path("/cluster")
    candidate = znodes.format_topic_id(uuid.uuid4())
    with contextlib.suppress(NodeExistsError):
        await zk.create(CLUSTER_ID, json.dumps({"version": "1", "id": candidate}).encode())
    data, _ = await zk.get(CLUSTER_ID)
    try:
        return str(json.loads(data)["id"])
    except (ValueError, KeyError, TypeError):
        log.error("%s holds %r, not Kafka's JSON; using it as the id", CLUSTER_ID, data[:60])
        return data.decode("utf-8", "replace")
