"""The local SparkSession the audit runs on: small, quiet and in UTC."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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


def local_session(app: str = "kafka-zk-audit") -> SparkSession:
    """A ``local[2]`` session, or the one already running (tests share one per session)."""
    from pyspark.sql import SparkSession

    # Spark warns when the host name resolves to a loopback address; a local audit wants loopback.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master("local[2]").appName(app)
    for key, value in CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    for key in ("spark.sql.shuffle.partitions", "spark.sql.session.timeZone", "spark.sql.adaptive.enabled"):
        spark.conf.set(key, CONF[key])
    return spark
