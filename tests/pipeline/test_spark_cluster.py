"""The audit, unchanged, on a real standalone Spark cluster: a master and a worker from the pyspark
distribution on loopback, the project shipped with ``--py-files``, and the report compared with the
local one. The directory is a real two-run chaos campaign's: two local clusters (``seed-3/``,
``seed-4/``), each started, broken and stopped, with the same node names and restarting epochs, so
the audit of both together is also the end-to-end test of many clusters in one directory.

Marked ``spark_cluster``: ``make spark-test`` runs it (CI does, after ``make test``); it takes a few
minutes, mostly the chaos run and three JVMs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import pipeline
from zkserver.ports import free_ports

pytestmark = pytest.mark.spark_cluster

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90.0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class Standalone:
    """``spark-class …Master`` and one ``…Worker``, each in a process group of its own."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.port, master_ui, worker_ui = free_ports(3)
        self.url = f"spark://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            # no REST submission server: it would take a fixed port (6066)
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        }
        spark_class = str(spark_home() / "bin" / "spark-class")
        self.master_log = work / "master.log"
        self.processes = [
            self._start(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--webui-port",
                    str(master_ui),
                ],
                self.master_log,
                env,
            )
        ]
        self._wait(self.master_log, "I have been elected leader")
        self.processes.append(
            self._start(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    self.url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "2",
                    "--memory",
                    "2g",
                    "--webui-port",
                    str(worker_ui),
                    "--work-dir",
                    str(work / "worker"),
                ],
                work / "worker.log",
                env,
            )
        )
        self._wait(self.master_log, "Registering worker")

    @staticmethod
    def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            return subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def _wait(self, log: Path, text: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while text not in log.read_text(errors="replace"):
            assert all(p.poll() is None for p in self.processes), log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, f"no {text!r} in {log} after {START_TIMEOUT_S:g} s"
            time.sleep(0.3)

    def stop(self) -> None:
        for process in reversed(self.processes):
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(process.pid, signal.SIGKILL)


SEEDS = ("seed-3", "seed-4")


@pytest.fixture(scope="module")
def chaos_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real campaign: two local clusters, each bounced and killed for 15 s, and stopped."""
    directory = tmp_path_factory.mktemp("chaos") / "campaign"
    command = [
        sys.executable, "-m", "chaos", "campaign", "--dir", str(directory),
        "--runs", "2", "--first-seed", "3", "--duration", "15", "--interval", "4", "--rate", "100",
        "--faults", "bounce,kill",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return directory


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    cluster = Standalone(tmp_path_factory.mktemp("standalone"))
    try:
        yield cluster
    finally:
        cluster.stop()


def project_zip(target: Path) -> Path:
    """The ``pipeline`` package as ``--py-files`` takes it."""
    package = Path(pipeline.__file__).parent
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(package.rglob("*.py")):
            archive.write(path, path.relative_to(package.parent))
    return target


def test_the_audit_submitted_to_a_standalone_cluster_reports_what_the_local_one_does(
    chaos_dir: Path, standalone: Standalone, tmp_path: Path
) -> None:
    python = sys.executable
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
    }
    submitted = tmp_path / "cluster-audit.json"
    command = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master", standalone.url,
        "--py-files", str(project_zip(tmp_path / "project.zip")),
        "--conf", "spark.driver.host=127.0.0.1",
        str(Path(pipeline.__file__).parent / "__main__.py"),
        "audit", "--dir", str(chaos_dir), "--out", str(submitted),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    master_log = standalone.master_log.read_text()
    assert "Registering app kafka-zk-audit" in master_log and "Launching executor" in master_log

    local = tmp_path / "local-audit.json"
    command = [python, "-m", "pipeline", "audit", "--dir", str(chaos_dir), "--out", str(local)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    on_cluster, here = json.loads(submitted.read_text()), json.loads(local.read_text())
    for part in ("passed", "inputs", "checks", "summary", "stats"):
        assert on_cluster[part] == here[part], part
    assert on_cluster["passed"] and here["inputs"]["history_files"] == 2
    checked = {c["name"] for c in here["checks"] if c["verdict"] == "passed" and c["checked"]}
    assert {"workload_no_loss", "one_leader_per_leader_epoch", "broker_epochs_move_forward"} <= checked
    # the campaign's runs carry the transactional workload (chaos/txn_workload.py): judged, and passed
    assert {"txn_isolation", "txn_durability", "eos_exactly_once"} <= checked
    # two clusters that each elected controller epoch 1 and gave broker 1 its own czxids: no false
    # split brain, and each seed's run and statistics apart
    assert here["summary"]["clusters"] == list(SEEDS)
    assert sorted(here["summary"]["by_run"]) == sorted(here["stats"]["runs"])
    assert [run.split("/")[0] for run in sorted(here["stats"]["runs"])] == list(SEEDS)
    for seed in SEEDS:
        assert here["stats"]["clusters"][seed]["controller_elections"] >= 1
        assert (
            here["summary"]["by_run"][next(r for r in here["stats"]["runs"] if r.startswith(seed))]["acked"]
            > 0
        )
