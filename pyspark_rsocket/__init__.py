"""``rsocket``: a PySpark data source (Python Data Source API) reading and writing RSocket
streams with :mod:`rsocket_tx`.

Found by PySpark without a register call (a top-level ``pyspark_<name>`` module exposing
``DefaultSource``)::

    df = (spark.read.format("rsocket")
          .option("endpoints", "tcp://127.0.0.1:7878").option("topic", "flights")
          .option("format", "json").schema("carrier string, dep_delay double")
          .load())
    stream = (spark.readStream.format("rsocket")
              .option("endpoints", "tcp://127.0.0.1:7878").option("topic", "flights")
              .option("maxRowsPerBatch", 10000).load())

or explicitly with :func:`register`. Reader options: :mod:`pyspark_rsocket.options`; readers:
:mod:`pyspark_rsocket.reader`; writers: :mod:`pyspark_rsocket.writer`.

Spark looks the format up, and runs the readers and writers, in Python worker processes started
with ``PYSPARK_PYTHON`` (default: the ``python3`` on ``PATH``). A job started as
``venv/bin/python job.py`` without activating the virtual environment would get a ``python3``
that cannot import this package, and Spark's ``DATA_SOURCE_NOT_FOUND``. So importing this module
before the SparkSession starts sets ``PYSPARK_PYTHON`` to the importing interpreter when it is
unset and the ``python3`` on ``PATH`` is another one (:func:`default_worker_python`);
:func:`register` checks the workers' interpreter and says to set ``PYSPARK_PYTHON`` when it
cannot import this package (:func:`check_worker_python`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from pyspark.sql.datasource import DataSource

__all__ = ["DefaultSource", "RSocketDataSource", "check_worker_python", "default_worker_python",
           "register", "worker_python"]

#: the environment variable Spark reads for its Python workers' interpreter
PYTHON_ENV = "PYSPARK_PYTHON"
#: seconds :func:`check_worker_python` waits for the interpreter to import this package
CHECK_TIMEOUT = 60


class RSocketDataSource(DataSource):
    """The ``rsocket`` data source: batch and streaming reads and writes.

    Options are checked on the driver when the reader or writer is made; a wrong option raises
    :class:`ValueError` naming it.
    """

    @classmethod
    def name(cls) -> str:
        """The format name: ``"rsocket"``."""
        return "rsocket"

    def schema(self):
        """The default schema (used when the user gives none): ``data binary, metadata binary``
        (plus ``shard int, offset bigint`` with option ``topic``) for format binary.

        :raises ValueError: format json/cbor without a user schema; bad options."""
        from .arrow import default_schema
        from .options import parse_read_options
        opts = parse_read_options(self.options)
        return default_schema(opts.format, opts.log_mode)

    def _read_options(self, schema, streaming: bool):
        from .arrow import check_schema
        from .options import parse_read_options
        opts = parse_read_options(self.options, streaming=streaming)
        check_schema(schema, opts.format, opts.log_mode)
        return opts

    def reader(self, schema):
        """A batch :class:`~pyspark_rsocket.reader.RSocketReader`.

        :raises ValueError: a bad option or a schema the format cannot produce."""
        from .reader import RSocketReader
        return RSocketReader(self._read_options(schema, False), schema)

    def streamReader(self, schema):
        """A :class:`~pyspark_rsocket.reader.RSocketStreamReader` (log mode only).

        :raises ValueError: a bad option, no ``topic``, or a schema the format cannot produce.
        """
        from .reader import RSocketStreamReader
        return RSocketStreamReader(self._read_options(schema, True), schema)

    def writer(self, schema, overwrite: bool):
        """A batch writer (:class:`pyspark_rsocket.writer.RSocketWriter`)."""
        from .writer import RSocketWriter
        return RSocketWriter(self.options, schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        """A streaming writer (:class:`pyspark_rsocket.writer.RSocketStreamWriter`)."""
        from .writer import RSocketStreamWriter
        return RSocketStreamWriter(self.options, schema)


#: What PySpark's data source lookup looks for in a ``pyspark_*`` module.
DefaultSource = RSocketDataSource


def register(spark) -> None:
    """Register the ``rsocket`` format with ``spark`` (a SparkSession) explicitly; only needed
    where PySpark's automatic lookup of ``pyspark_*`` modules cannot see this package.

    :raises RuntimeError: Spark's Python workers (:func:`worker_python`) cannot import this
        package; the message says to set ``PYSPARK_PYTHON`` (:func:`check_worker_python`).
    """
    check_worker_python(worker_python(spark))
    spark.dataSource.register(RSocketDataSource)


def worker_python(spark=None) -> str:
    """The interpreter Spark starts its Python workers with: ``spark``'s
    ``spark.pyspark.python`` setting if given, else ``PYSPARK_PYTHON``, else Spark's default
    ``python3`` (looked up on ``PATH``).

    :param spark: a SparkSession, or None (the environment only).
    """
    if spark is not None:
        configured = spark.conf.get("spark.pyspark.python", None)
        if configured:
            return str(configured)
    return os.environ.get(PYTHON_ENV) or "python3"


def check_worker_python(python: str | None = None) -> None:
    """Check that ``python`` can import this package (a Spark worker running it finds the
    ``rsocket`` format), by running it once (about a second: it imports PySpark).

    :param python: an interpreter, a path or a name on ``PATH``; None: :func:`worker_python`.
    :raises RuntimeError: it cannot (missing, or the package or PySpark is not installed for
        it); the message names it and says to set ``PYSPARK_PYTHON`` to ``sys.executable``
        before the SparkSession starts.
    """
    python = python or worker_python()
    try:
        result = subprocess.run([python, "-c", "import pyspark_rsocket"], capture_output=True,
                                text=True, timeout=CHECK_TIMEOUT)
        problem = result.stderr.strip().splitlines()[-1:] if result.returncode else None
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = [str(exc)]
    if problem is not None:
        raise RuntimeError(
            f"Spark's Python workers run {python!r}, which cannot import pyspark_rsocket "
            f"({'; '.join(problem) or 'it failed'}): Spark will not find the 'rsocket' data "
            f"source (DATA_SOURCE_NOT_FOUND). Set {PYTHON_ENV}={sys.executable} in the "
            "environment before the SparkSession starts (or activate the virtual environment "
            "that has pyspark_rsocket; on a cluster, install it for the executors' Python).")


def default_worker_python() -> bool:
    """Make Spark's Python workers run this interpreter when nothing says otherwise: set
    ``PYSPARK_PYTHON`` to ``sys.executable`` if it is unset, no SparkContext is running yet
    (Spark reads it when it starts) and the ``python3`` on ``PATH`` is not in this
    interpreter's directory (e.g. ``venv/bin/python job.py`` without activating the venv).
    Called when this module is imported.

    :returns: whether it set ``PYSPARK_PYTHON``.
    """
    if os.environ.get(PYTHON_ENV):
        return False
    from pyspark.sql import SparkSession
    if SparkSession.getActiveSession() is not None:
        return False  # too late: Spark read the environment when it started
    on_path = shutil.which("python3")
    if on_path is not None and Path(on_path).absolute().parent == \
            Path(sys.executable).absolute().parent:
        return False  # the workers' python3 is this environment's
    os.environ[PYTHON_ENV] = sys.executable
    return True


default_worker_python()
