"""A daemon started from the command line on a properties file, for tests of how it refuses bad config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def start_with(module: str, properties: str, directory: Path) -> subprocess.CompletedProcess[str]:
    """``python -m <module> --config FILE`` with ``properties`` as the file, without the test's own
    ``KAFKA_*`` environment overrides; returns once it exits (a bad key exits at once)."""
    path = directory / "server.properties"
    path.write_text(properties)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    return subprocess.run(
        [sys.executable, "-m", module, "--config", str(path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
