"""A quixstreams application with ``processing_guarantee="exactly-once"`` and a stateful operation (a
running total per key, kept in RocksDB and its changelog topic): run by tests/broker/test_stream_clients.py
in ``.run/pyclients``, as ``quix_eos.py SERVERS STATE_DIR COUNT``; it stops after COUNT records."""

from __future__ import annotations

import sys
from typing import Any

from quixstreams import Application, State


def main() -> None:
    servers, state_dir, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    app = Application(
        broker_address=servers,
        consumer_group="quix-eos",
        processing_guarantee="exactly-once",
        auto_offset_reset="earliest",
        state_dir=state_dir,
        loglevel="WARNING",
        commit_interval=0.5,
    )
    source = app.topic("quix-in", value_deserializer="json", key_deserializer="str")
    sink = app.topic("quix-out", value_serializer="json", key_serializer="str")

    def running_total(value: dict[str, Any], state: State) -> dict[str, Any]:
        total = state.get("total", 0) + value["n"]
        state.set("total", total)
        return {"total": total}

    app.dataframe(source).apply(running_total, stateful=True).to_topic(sink)
    app.run(count=count, timeout=120)


if __name__ == "__main__":
    main()
