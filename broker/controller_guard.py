"""Beyond Kafka: a control request from a new controller epoch is believed only once ZooKeeper
confirms that epoch.

KIP-380's epochs fence *stale* controllers, not *forged* ones. Without this check, one LeaderAndIsr
carrying controller epoch 2^30 from anyone who can reach the control-plane listener would be
accepted, and from then on this broker would refuse every request of the real controller as
STALE_CONTROLLER_EPOCH. So a request naming an epoch above the highest one confirmed here is held
against ``/controller`` and ``/controller_epoch``, read after a ZooKeeper ``sync`` (a lagging server
cannot answer from the past), in one multi-read:

* they name this controller and this epoch: the epoch is confirmed, the request goes on;
* ZooKeeper holds a newer epoch: the request comes from a deposed controller (STALE_CONTROLLER_EPOCH);
* anything else, an epoch ZooKeeper never had or another controller: refused as the sender is not
  the cluster's controller (CLUSTER_AUTHORIZATION_FAILED), and nothing it asked for is applied.

The read happens once per new epoch, i.e. once per failover, never per request. Within the confirmed
epoch, a request naming another controller id is refused without a read. Older epochs are left to
the usual stale check. When ZooKeeper does not answer within ``timeout_s`` the request is refused: a
broker cut off from ZooKeeper that long loses its session and is sent everything again when it
registers anew.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from protocol import ErrorCode

log = logging.getLogger("broker.controller_guard")

RETRY_S = 0.2
"""Pause between attempts to read ZooKeeper while it does not answer."""


@dataclass(frozen=True, slots=True)
class ZkController:
    """What ZooKeeper says: the active controller's id and the controller epoch (None: absent)."""

    controller_id: int | None
    epoch: int | None


@dataclass(frozen=True, slots=True)
class Refusal:
    code: ErrorCode
    reason: str
    zookeeper: ZkController | None = None


class ControllerEpochGuard:
    def __init__(self, read: Callable[[], ZkController], *, timeout_s: float) -> None:
        self.read = read
        """Blocking: sync, then ``/controller`` and ``/controller_epoch``; raises on ZooKeeper trouble."""
        self.timeout_s = timeout_s
        self.confirmed_epoch = 0
        self.confirmed_id: int | None = None
        self.reads = 0
        self._lock = threading.Lock()

    def check(self, controller_id: int, epoch: int) -> Refusal | None:
        """None to go on with the request, or why it is refused. Called on the handler threads."""
        with self._lock:
            if epoch < self.confirmed_epoch:
                return None  # the stale check answers it
            if epoch == self.confirmed_epoch and self.confirmed_id is not None:
                if controller_id == self.confirmed_id:
                    return None
                return Refusal(
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    f"controller {controller_id} claims epoch {epoch}, which belongs to controller "
                    f"{self.confirmed_id}",
                )
            found = self._read()
            if found is None:
                return Refusal(
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    f"epoch {epoch} could not be confirmed: ZooKeeper did not answer in {self.timeout_s:g} s",
                )
            if found.epoch == epoch and found.controller_id == controller_id:
                self.confirmed_epoch, self.confirmed_id = epoch, controller_id
                return None
            if found.epoch is not None and found.epoch > epoch:
                return Refusal(
                    ErrorCode.STALE_CONTROLLER_EPOCH,
                    f"ZooKeeper already holds controller epoch {found.epoch}",
                    found,
                )
            return Refusal(
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                f"ZooKeeper names controller {found.controller_id} with epoch {found.epoch}, not "
                f"controller {controller_id} with epoch {epoch}",
                found,
            )

    def _read(self) -> ZkController | None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            self.reads += 1
            try:
                return self.read()
            except Exception as exc:  # ZooKeeper trouble: ask again until the deadline
                if time.monotonic() + RETRY_S >= deadline:
                    log.warning("controller epoch not confirmed: %r", exc)
                    return None
            time.sleep(RETRY_S)
