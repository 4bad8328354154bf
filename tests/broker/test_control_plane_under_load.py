"""KIP-291 with a real Produce backlog: while the data-plane queue is full and its handler busy
appending, an UpdateMetadata on the control-plane listener is still handled (asserted by its
completion, not by a timing).

Each Produce request carries hundreds of one-record batches, so its handling (one CRC check and
header parse per batch) costs more than reading it: the handler, not the network, is the bottleneck,
and pipelining clients keep the queue at its capacity.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

import pytest

from protocol import ApiKey, ErrorCode, encode_request
from protocol.record_batch import build_batch
from tests.support.cluster import Cluster, epoch_of
from tests.support.metrics import scrape
from tests.support.raw_client import RawClient
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.zookeeper, pytest.mark.secure_variant]

QUEUE = 4
CONNECTIONS = 12
DEPTH = 4
BATCHES_PER_REQUEST = 400
QUEUE_SIZE = "kafka_network_requestchannel_requestqueuesize"
DATA_IDLE = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"


def produce_frame(correlation_id: int) -> bytes:
    batch = build_batch([(None, b"x" * 20)], 0)
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30000,
        "topic_data": [
            {"name": "flood", "partition_data": [{"index": 0, "records": batch * BATCHES_PER_REQUEST}]}
        ],
    }
    return encode_request(ApiKey.PRODUCE, 7, correlation_id, "flood", body)


async def flood(host: str, port: int, tls: ssl.SSLContext | None, stop: asyncio.Event) -> int:
    """Keep DEPTH produce requests written ahead on one connection; returns how many were answered."""
    client = await RawClient.connect(port, host, tls=tls)
    frame = produce_frame(0)  # the correlation id is not checked by this client
    answered = 0
    try:
        await client.send(frame * DEPTH)
        while not stop.is_set():
            await client.read_frame()
            answered += 1
            await client.send(frame)
    finally:
        client.close()
    return answered


async def test_an_update_metadata_is_handled_while_produce_fills_the_data_plane(cluster: Cluster) -> None:
    settings = {"num.io.threads": 1, "queued.max.requests": QUEUE, "metrics.port": 0}
    await cluster.start((1,), {1: settings})
    await cluster.topic("flood", {0: (1,)})
    broker = cluster.brokers[1]
    port = (await broker.wait_kind("broker_started"))["metrics_port"]
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    tls = cluster.client_security.tls if cluster.client_security is not None else None
    address = broker.endpoint(broker.client_listener)
    floods = [asyncio.create_task(flood(*address, tls, stop)) for _ in range(CONNECTIONS)]
    try:

        async def full() -> bool:
            return (await loop.run_in_executor(None, scrape, port))[QUEUE_SIZE] == QUEUE

        await wait_until(full, timeout=60, what="the data-plane queue at its capacity")
        controller = cluster.controller
        assert controller is not None
        elected = await controller.wait_kind("controller_elected")
        body = {  # as the controller would send it: its id and epoch
            "controller_id": controller.controller_id,
            "controller_epoch": elected["controller_epoch"],
            "max_broker_epoch": epoch_of(broker),
            "topic_states": [],
            "live_brokers": [],
        }
        reply = await asyncio.wait_for(broker.request("CONTROLLER", ApiKey.UPDATE_METADATA, 7, body), 30)
        assert reply == {"error_code": ErrorCode.NONE}
        after = await loop.run_in_executor(None, scrape, port)
        # What matters is that requests were still waiting (a data-plane UpdateMetadata would have
        # waited behind them all). The gauge is one sample while the network thread refills the queue,
        # and under TLS on a busy machine the clients can lag the handler for a moment: a few samples.
        backlog = [after[QUEUE_SIZE]]
        for _ in range(4):
            backlog.append((await loop.run_in_executor(None, scrape, port))[QUEUE_SIZE])
        assert max(backlog) >= 1, f"the backlog was gone when the answer came: {backlog}"
        assert after[DATA_IDLE] < 0.5, "the data-plane handler was busy"
        assert not any(f.done() for f in floods), [f.exception() for f in floods if f.done()]
    finally:
        stop.set()
        for task in floods:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*floods, return_exceptions=True)
