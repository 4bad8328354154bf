"""Fixtures of the benchmark smoke tests: those that measure Apache Kafka beside ours need its jars."""

from __future__ import annotations

import pytest

from kafkapeer.jars import BROKER, JarsMissing, classpath


@pytest.fixture(scope="session")
def kafka_jars() -> str:
    """Kafka 3.9's class path; fails (never skips) when ``make kafka`` has not resolved it, so that a
    Kafka benchmark cannot pass by not running."""
    try:
        return classpath(BROKER)
    except JarsMissing as exc:
        pytest.fail(f"Kafka's jars are missing, so Kafka cannot be measured beside ours: {exc}")
