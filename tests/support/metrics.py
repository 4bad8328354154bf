"""Reading Prometheus metrics in tests: a daemon's ``/metrics`` endpoint, or a registry in this process."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Collection

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from daemon.metrics import Metrics


def scrape_text(port: int) -> str:
    """The text of ``/metrics`` on ``port`` (127.0.0.1). Blocking."""
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def parse(text: str) -> dict[str, float]:
    """Every sample of a text-format scrape: the series (name and labels, as the text spells them)
    -> value."""
    return {
        line.rpartition(" ")[0]: float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def scrape(port: int) -> dict[str, float]:
    """Every sample of ``/metrics`` on ``port`` (:func:`parse`). Blocking."""
    return parse(scrape_text(port))


async def scrape_async(port: int) -> dict[str, float]:
    """:func:`scrape` in a worker thread, for tests running on the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, scrape, port)


async def scrape_text_async(port: int) -> str:
    """:func:`scrape_text` in a worker thread."""
    return await asyncio.get_running_loop().run_in_executor(None, scrape_text, port)


def registry_samples(
    source: Metrics | CollectorRegistry, *, without: Collection[str] = ()
) -> dict[str, float]:
    """Every sample of a registry in this process (a daemon's ``Metrics`` or a bare registry), keyed
    ``name`` or ``name{label="value",…}`` with the labels sorted by name; the labels in ``without``
    are left out of the key."""
    registry = source.registry if isinstance(source, Metrics) else source
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()) if k not in without)
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return out
