"""ZooKeeper storage layer of the control plane, plus a local ZooKeeper runner for dev and tests."""

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

__all__ = [
    "JavaNotFound",
    "LocalServerError",
    "ZooKeeperEnsemble",
    "ZooKeeperNotFound",
    "ZooKeeperProcess",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "find_java",
    "four_letter_word",
    "resolve_classpath",
    "server_mode",
]
