"""Reading a daemon's Prometheus endpoint in tests."""

from __future__ import annotations

import urllib.request


def scrape(port: int) -> dict[str, float]:
    """Every sample of ``/metrics`` on ``port``: the series (name and labels) -> value. Blocking."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {
        line.rpartition(" ")[0]: float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
