"""The local SparkSession the audit runs on: small, quiet and in UTC."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.jvm import SMALL_INPUT_BYTES, running, settings_for

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CONF = {
    "spark.ui.enabled": "false",
    # Event logs of a local cluster are megabytes: four shuffle partitions beat the default 200.
    "spark.sql.shuffle.partitions": "4",
    # The logs' ``ts`` ends in Z; reading and formatting them in UTC keeps the report exact.
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.log.level": "ERROR",
    "spark.ui.showConsoleProgress": "false",
    # The audit runs many small queries: adaptive execution would re-plan each one and add a job per stage.
    "spark.sql.adaptive.enabled": "false",
}


LOOPBACK_DRIVER = ("spark.driver.bindAddress", "spark.driver.host")
"""Settings kept for a local audit only: on a cluster, the executors must reach the driver."""


def local_session(
    app: str = "kafka-zk-audit",
    jvm_log: Path | None = None,
    input_bytes: int = 0,
    *,
    record: bool = False,
    lasting: bool = False,
) -> SparkSession:
    """A ``local[2]`` session, or the one already running (tests share one per session); under
    ``spark-submit``, a session on the master it was given (a standalone cluster), same settings.
    A JVM started here gets the heap, compiler and class-data archive of ``pipeline.jvm`` for
    ``input_bytes`` (``lasting``: it will run many audits, as the tests' does); with ``record``, it
    records the archive if there is none yet (stop the session with ``pipeline.jvm.finish``).

    The JVM writes its start-up lines (log4j's profile, native-library and incubator-module warnings)
    to its stderr before any log level applies. With ``jvm_log``, a JVM started here gets that file as
    its stdout and stderr for good, so the audit's own output stays clean; None leaves them on ours
    (``--verbose``).
    """
    from pyspark.sql import SparkSession

    starts_jvm = not running()
    # Spark warns when the host name resolves to a loopback address; a local audit wants loopback.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app)
    if not submitted():
        builder = builder.master("local[2]")
    for key, value in CONF.items():
        if key not in LOOPBACK_DRIVER or not submitted():  # a cluster's workers reach the driver
            builder = builder.config(key, value)
    if not submitted():  # spark-submit's JVM is running already, with the heap it was given
        for key, value in settings_for(input_bytes, record=record and starts_jvm, lasting=lasting).items():
            builder = builder.config(key, value)
    with _output_to(jvm_log) if jvm_log is not None and starts_jvm else contextlib.nullcontext():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    for key in ("spark.sql.shuffle.partitions", "spark.sql.session.timeZone", "spark.sql.adaptive.enabled"):
        spark.conf.set(key, CONF[key])
    return spark


# Below SMALL_INPUT_BYTES an audit runs a few dozen small jobs, where whole-stage code generation
# costs more in compiling than it saves, and a shuffle partition per core is only scheduling.
SMALL = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.shuffle.partitions": "1",
    # A join of one cached partition needs no broadcast: each would be a Spark job of its own.
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.inMemoryColumnarStorage.compressed": "true",
}
LARGE = {
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.shuffle.partitions": CONF["spark.sql.shuffle.partitions"],
    "spark.sql.autoBroadcastJoinThreshold": "10485760",  # Spark's default: 10 MB
    # Compressing a cache tries every encoding on every value first: ten million history lines took
    # a third longer to cache, for half the memory.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}


def fit_to(spark: SparkSession, input_bytes: int) -> None:
    """``SMALL``'s settings for input below ``SMALL_INPUT_BYTES``, else ``LARGE``'s (a session may audit
    both, as the tests' does)."""
    for key, value in (SMALL if input_bytes < SMALL_INPUT_BYTES else LARGE).items():
        spark.conf.set(key, value)


def small_side(df: DataFrame) -> DataFrame:
    """``df``, a small table about to be joined, as a broadcast, except in a small audit: there the
    other side is one cached partition that joins without a shuffle, and a broadcast would only add a
    Spark job of its own (a few hundred milliseconds each)."""
    from pyspark.sql import functions as F

    return df if is_small(df.sparkSession) else F.broadcast(df)


def is_small(spark: SparkSession) -> bool:
    """Whether the session is set for a small audit (:func:`fit_to`)."""
    return spark.conf.get("spark.sql.shuffle.partitions") == SMALL["spark.sql.shuffle.partitions"]


def submitted() -> bool:
    """Whether ``spark-submit`` runs this driver: then its ``--master`` (a standalone cluster's
    ``spark://HOST:7077``, or its own default) decides, not ``local[2]``. spark-submit hands the
    Python driver its JVM's gateway through ``PYSPARK_GATEWAY_PORT``."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


@contextlib.contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """File descriptors 1 and 2 are ``path`` while the block runs: a child process started meanwhile
    (the JVM) keeps them, so nothing it prints can mix with the report on stdout; this process gets
    its own back."""
    sys.stdout.flush()
    sys.stderr.flush()
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    try:
        with path.open("ab") as log:
            for fd in saved:
                os.dup2(log.fileno(), fd)
        yield
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
