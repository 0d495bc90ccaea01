"""Fixtures of the Spark tests: ONE session-wide SparkSession (``spark``) and a session-wide
StreamLog server subprocess (``log_server``); helpers live in spark_support.py."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_support import LogServer, spark_builder  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    """The session's SparkSession: local[2,4], 2 shuffle partitions, UI off, quiet logs.
    The ``rsocket`` format is NOT registered: PySpark must find ``pyspark_rsocket`` itself."""
    session = spark_builder().getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def log_server(tmp_path_factory):
    """A :class:`spark_support.LogServer`: two StreamLog endpoints (``.endpoints``, files
    ``.dbs``) and a fault-injecting one (``.gap_endpoint``, file ``.gap_db``)."""
    base = tmp_path_factory.mktemp("streamlog")
    server = LogServer([str(base / "a.db"), str(base / "b.db")], str(base / "gap.db"))
    yield server
    server.stop()
