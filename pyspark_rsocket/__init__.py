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
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

__all__ = ["DefaultSource", "RSocketDataSource", "register"]


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
    where PySpark's automatic lookup of ``pyspark_*`` modules cannot see this package."""
    spark.dataSource.register(RSocketDataSource)
