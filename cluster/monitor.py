"""A local Prometheus beside a local cluster (``python -m cluster up --monitor``).

It scrapes every daemon's ``/metrics`` with the jobs of the compose file's Prometheus (``controllers``,
``brokers``), and ZooKeeper through ``python -m zkserver.exporter`` (job ``zookeeper``), and evaluates
the same alert rules (``deploy/prometheus/rules/``), so that a user without Docker can run the queries
of the Grafana dashboard and watch the alerts. The binary is Debian's
``prometheus`` package (``make clients`` installs it as root); without it ``--monitor`` says so.
The small HTTP-API readers below serve the CLI and the tests alike.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from cluster.processes import REPO

__all__ = [
    "RULES",
    "MonitorError",
    "alert_rules",
    "alerts",
    "configure",
    "query",
    "start",
    "start_exporter",
    "targets",
]

RULES = REPO / "deploy" / "prometheus" / "rules"
"""The alert rules the compose Prometheus loads too."""
SCRAPE_INTERVAL = "5s"
"""As the compose file's Prometheus: a killed broker shows within seconds."""
READY_TIMEOUT_S = 30.0


class MonitorError(RuntimeError):
    """Prometheus is missing, did not start, or answered with an error; the message says which."""


def binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        raise MonitorError(
            "prometheus not found: install Debian's prometheus package (make clients does, as root)"
        )
    return found


def configure(directory: Path, state: dict[str, Any], rules: Path = RULES) -> Path:
    """Write ``directory/prometheus.yml`` and its file_sd target lists for the daemons of ``state``;
    returns the config file. The targets are files, so a restarted daemon needs no new config."""
    directory.mkdir(parents=True, exist_ok=True)
    jobs = {"controllers": "controller", "brokers": "broker", "zookeeper": "zookeeper-exporter"}
    scrape_configs = []
    for job, role in jobs.items():
        entries = [p for p in state["processes"] if p["role"] == role and p.get("metrics_port")]
        groups = [
            {
                "targets": [f"{p.get('address', '127.0.0.1')}:{p['metrics_port']}"],
                "labels": {"service": p["name"]},
            }
            for p in entries
        ]
        target_file = directory / f"{job}.json"
        target_file.write_text(json.dumps(groups, indent=2) + "\n")
        scrape_configs.append({"job_name": job, "file_sd_configs": [{"files": [str(target_file)]}]})
    config = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "rule_files": [str(rules / "*.yml")],
        "scrape_configs": scrape_configs,
    }
    path = directory / "prometheus.yml"
    path.write_text(json.dumps(config, indent=2) + "\n")  # JSON is YAML
    return path


def start_exporter(directory: Path, state: dict[str, Any], port: int) -> dict[str, Any]:
    """``python -m zkserver.exporter`` for every ZooKeeper server of ``state`` on ``127.0.0.1:port``;
    returns its ``cluster.json`` entry. It asks ``mntr`` on the plaintext client ports."""
    servers = ",".join(
        f"{p.get('address', '127.0.0.1')}:{p['port']}" for p in state["processes"] if p["role"] == "zookeeper"
    )
    log = directory / "zookeeper-exporter.log"
    with log.open("ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "zkserver.exporter", "--zookeeper", servers, "--host", "127.0.0.1",
             "--port", str(port)],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    return {
        "name": "zookeeper-exporter",
        "role": "zookeeper-exporter",
        "pid": child.pid,
        "metrics_port": port,
        "log": str(log),
    }


def start(directory: Path, config: Path, port: int) -> dict[str, Any]:
    """Start Prometheus on ``127.0.0.1:port`` in its own session and wait until it is ready; returns
    its ``cluster.json`` entry (``down`` stops it with the rest)."""
    log = directory / "prometheus.log"
    with log.open("ab") as out:
        child = subprocess.Popen(
            [
                binary(),
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not _ready(url):
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            raise MonitorError(f"prometheus did not become ready on {url}: see {log}")
        time.sleep(0.2)
    return {
        "name": "prometheus",
        "role": "prometheus",
        "pid": child.pid,
        "port": port,
        "url": url,
        "config": str(config),
        "log": str(log),
    }


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _api(url: str, path: str, **params: str) -> Any:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    try:
        with urllib.request.urlopen(f"{url}/api/v1/{path}{query}", timeout=10) as answer:
            body = json.load(answer)
    except urllib.error.HTTPError as exc:
        body = json.load(exc)
    except OSError as exc:
        raise MonitorError(f"cannot reach prometheus at {url}: {exc}") from None
    if body.get("status") != "success":
        raise MonitorError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
    return body["data"]


def query(url: str, expr: str) -> list[dict[str, Any]]:
    """The instant vector (or scalar, as one sample) ``expr`` evaluates to now."""
    data = _api(url, "query", query=expr)
    if data["resultType"] in ("scalar", "string"):
        return [{"metric": {}, "value": data["result"]}]
    return list(data["result"])


def alerts(url: str) -> list[dict[str, Any]]:
    """Pending and firing alerts, with their labels."""
    return list(_api(url, "alerts")["alerts"])


def alert_rules(url: str) -> list[dict[str, Any]]:
    """The alerting rules Prometheus loaded (name, query, duration, state)."""
    groups = _api(url, "rules", type="alert")["groups"]
    return [rule for group in groups for rule in group["rules"]]


def targets(url: str) -> list[dict[str, Any]]:
    """The active scrape targets, each with its ``health`` (``up``, ``down``, ``unknown``)."""
    return list(_api(url, "targets", state="active")["activeTargets"])
