"""One module per API, each declaring its request and response schemas as functions of the version.

The two epoch protocols of the control requests are described here once: KIP-380's per-broker
``broker_epoch`` versions and seed 002's ``max_broker_epoch`` versions, which reuse the same layout.
"""

from __future__ import annotations

from protocol.api import ApiKey

PER_BROKER_EPOCH_VERSIONS: dict[ApiKey, int] = {
    ApiKey.LEADER_AND_ISR: 2,
    ApiKey.UPDATE_METADATA: 5,
    ApiKey.STOP_REPLICA: 1,
}
MAX_BROKER_EPOCH_VERSIONS: dict[ApiKey, int] = {
    ApiKey.LEADER_AND_ISR: 5,
    ApiKey.UPDATE_METADATA: 7,
    ApiKey.STOP_REPLICA: 4,
}


def epoch_field(api_key: ApiKey, version: int) -> str:
    """The body key of a control request's int64 epoch: ``max_broker_epoch`` in the seed versions."""
    return "max_broker_epoch" if MAX_BROKER_EPOCH_VERSIONS.get(api_key) == version else "broker_epoch"
