"""The secured variant: docker-compose.secure.yml on top, its clients' settings copied out of its secrets.

Its clients connect over SASL_SSL as admin, with the ``client.properties`` the variant generates in
its secrets volume; the admin CLI asked inside the network (``python -m cluster brokers``) reaches
ZooKeeper with the variant's admin identity.
"""

from __future__ import annotations

import shutil

from daemon.config import parse_properties
from deploy.compose import COMPOSE_FILE, REPO
from deploy.compose_test import Run
from deploy.compose_test.client import CACHE

__all__ = ["SECURE_FILES", "ZOOKEEPER_ADMIN_ARGS", "step_client_config"]

SECURE_FILES = (COMPOSE_FILE, REPO / "docker-compose.secure.yml")
ZOOKEEPER_ADMIN_ARGS = ("--zk-config", "/secrets/zookeeper-admin.properties")
"""The admin CLI's ZooKeeper identity in the secured variant (``Compose.admin_args``)."""


def step_client_config(run_: Run) -> str:
    """The secured variant's client settings (SASL_SSL as admin), copied out of its secrets volume."""
    target = CACHE / "secure-client"
    shutil.rmtree(target, ignore_errors=True)
    run_.compose("cp", "broker-1:/secrets/client", str(target))
    path = target / "client.properties"
    settings = parse_properties(path.read_text())
    settings["ssl.ca.location"] = str(target / settings["ssl.ca.location"])
    run_.security = {k: v for k, v in settings.items() if k != "bootstrap.servers"}
    return f"{path}: " + ", ".join(f"{k}={v}" for k, v in settings.items() if "password" not in k)
