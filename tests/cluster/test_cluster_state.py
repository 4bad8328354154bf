"""cluster.json under concurrent node actions: each writes its own node's pid, undoing no other's."""

from __future__ import annotations

import threading
from pathlib import Path

from cluster import state_file


def test_recording_pids_keeps_every_other_nodes_change(tmp_path: Path) -> None:
    names = [f"broker-{i}" for i in range(8)]
    state_file.save_state(
        tmp_path,
        {"version": state_file.STATE_VERSION, "processes": [{"name": n, "pid": 0} for n in names]},
    )

    def act(name: str, pid: int) -> None:
        for _ in range(25):  # a node bounced again and again while the others are too
            state_file.record_pids(tmp_path, {name: pid})

    threads = [threading.Thread(target=act, args=(n, 1000 + i)) for i, n in enumerate(names)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state = state_file.load_state(tmp_path)
    assert {p["name"]: p["pid"] for p in state["processes"]} == {n: 1000 + i for i, n in enumerate(names)}
