"""ZooKeeper for the control plane: Kafka's znodes, and the operations both daemons need on them.

- ``znodes``: paths and JSON formats, with tolerant readers (corrupt data is logged and skipped);
- ``ops``: the write operations (Create, SetData, Delete, Check) as typed, frozen values;
- ``aio``: an asyncio bridge over kazoo, whose ``multi`` commits those values;
- ``registration``: KIP-380 broker registration (the czxid is the broker epoch);
- ``election`` and ``fencing``: controller election and writes fenced by ``/controller_epoch``;
- ``batch_read``: multi-read batches for loading hundreds of thousands of znodes;
- ``local_server``: a real ZooKeeper (standalone or ensemble) for ``make run`` and the tests.
"""

from zkstore.aio import AsyncZooKeeper, ConnectionEvent
from zkstore.election import read_controller_epoch, resign, try_elect
from zkstore.fencing import ControllerMoved, FencedWriter, FencingToken
from zkstore.local_server import (
    JavaNotFound,
    LocalServerError,
    ZooKeeperEnsemble,
    ZooKeeperNotFound,
    ZooKeeperProcess,
    ZooKeeperServer,
    ZooKeeperStartError,
    find_java,
    four_letter_word,
    resolve_classpath,
    server_mode,
)
from zkstore.registration import BrokerIdInUse, register_broker

__all__ = [
    "AsyncZooKeeper",
    "BrokerIdInUse",
    "ConnectionEvent",
    "ControllerMoved",
    "FencedWriter",
    "FencingToken",
    "JavaNotFound",
    "LocalServerError",
    "ZooKeeperEnsemble",
    "ZooKeeperNotFound",
    "ZooKeeperProcess",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "find_java",
    "four_letter_word",
    "read_controller_epoch",
    "register_broker",
    "resign",
    "resolve_classpath",
    "server_mode",
    "try_elect",
]
