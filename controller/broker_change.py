"""KIP-380 bounce detection: classify a BrokerChange into new, dead and bounced brokers by epoch.

Reading only the ids of ``/brokers/ids`` misses a broker that restarted faster than the controller
processed the change. Comparing each id's czxid (its broker epoch) with the cached one catches it: the
same id with a higher epoch is a broker that went away and came back, which must be failed and then
started again so it receives the full state it lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """Broker ids by kind, each sorted; ``epochs`` holds the current epoch of every present broker."""

    new: tuple[int, ...]
    dead: tuple[int, ...]
    bounced: tuple[int, ...]
    epochs: Mapping[int, int]

    @property
    def empty(self) -> bool:
        return not (self.new or self.dead or self.bounced)


def classify_broker_change(cached: Mapping[int, int], current: Mapping[int, int]) -> BrokerChange:
    """``cached`` and ``current`` map broker id -> epoch (czxid): the controller's view and ZooKeeper's."""
    new = tuple(sorted(current.keys() - cached.keys()))
    dead = tuple(sorted(cached.keys() - current.keys()))
    bounced = tuple(sorted(b for b in current.keys() & cached.keys() if current[b] > cached[b]))
    return BrokerChange(new=new, dead=dead, bounced=bounced, epochs=dict(current))
