"""The leader epochs a coordinator has seen of its internal partitions, so that a LeaderAndIsr older
than the last one seen (delivered late, from another thread's queue) cannot undo a newer one."""

from __future__ import annotations

__all__ = ["PartitionEpochs"]


class PartitionEpochs:
    """Partition -> the newest leader epoch seen; used on the event loop only."""

    def __init__(self) -> None:
        self._epochs: dict[int, int] = {}

    def accept(self, partition: int, epoch: int | None) -> bool:
        """Whether a change at ``epoch`` is to be applied (None: a StopReplica, always), remembering it."""
        if epoch is None:
            return True
        known = self._epochs.get(partition)
        if known is not None and epoch < known:
            return False
        self._epochs[partition] = epoch
        return True

    def get(self, partition: int) -> int | None:
        return self._epochs.get(partition)
