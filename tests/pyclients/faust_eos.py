"""A faust-streaming application with ``processing_guarantee="exactly_once"`` and a table (a running
total per key, its changelog topic compacted): run by tests/broker/test_stream_clients.py in
``.run/pyclients`` as ``faust_eos.py SERVERS DATA_DIR``; it works until it is terminated."""

from __future__ import annotations

import sys
from typing import Any

import faust


def main() -> None:
    servers, data_dir = sys.argv[1], sys.argv[2]
    app = faust.App(
        "faust-eos",
        broker=f"kafka://{servers}",
        processing_guarantee="exactly_once",
        store="memory://",
        datadir=data_dir,
        topic_partitions=3,
        topic_replication_factor=3,
        web_enabled=False,
    )
    source = app.topic("faust-in", key_type=str, value_serializer="json")
    sink = app.topic("faust-out", key_type=str, value_serializer="json")
    totals = app.Table("totals", default=int, partitions=3)

    @app.agent(source)
    async def count(stream: Any) -> None:
        async for key, value in stream.items():
            totals[key] += value["n"]
            await sink.send(key=key, value={"total": totals[key]})

    sys.argv = [sys.argv[0], "worker", "-l", "warn"]
    app.main()


if __name__ == "__main__":
    main()
