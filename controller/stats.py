"""Counters the active controller keeps for its metrics, written only by the event task."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class ControllerStats:
    unclean_elections: int = 0
    """Leaders elected from outside the ISR (``unclean.leader.election.enable``)."""
    encodes: int = 0
    """Request bodies serialized: one per change in max_broker_epoch mode, one per broker otherwise."""
    bytes_encoded: int = 0
