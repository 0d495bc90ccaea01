"""The JSON records of the ``rsocket`` sink (pyspark_rsocket.writer) against Spark's own JSON
writer: map keys of every type Spark allows are written as ``to_json`` writes them (expected
values computed by Spark in the same session), and floats are written the same by the
column-wise and the row-by-row encoder, in a form Spark reads back to the same doubles.

Fixtures (tests/spark/conftest.py): ``spark`` (session-wide local SparkSession) and
``log_server`` (a StreamLogResponder in a subprocess).
"""

from __future__ import annotations

import json
import math
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from pyspark_rsocket.writer import _encoder  # noqa: E402
from rsocket_tx.apps.streamlog import StreamLog  # noqa: E402

#: One row of maps, one column per key type Spark allows in a map (with int/string values, so
#: that a row's whole JSON text can be compared byte for byte).
MAP_KEYS_SQL = r"""
SELECT map(DATE'2013-01-02', 1, DATE'1969-12-31', 2, DATE'0001-01-01', 3) AS day,
       map(TIMESTAMP'2013-01-01 05:15:01.25 UTC', 1,
           TIMESTAMP'1969-12-31 23:59:59.999999 UTC', 2) AS ts,
       map(TIMESTAMP_NTZ'2013-01-01 05:15:01.25', 1) AS ntz,
       map(CAST('NaN' AS DOUBLE), 1, CAST('Infinity' AS DOUBLE), 2,
           CAST('-Infinity' AS DOUBLE), 3, 0.0D, 4) AS special,
       map(1.0D, 1, 1e15D, 2, 1e16D, 3, 1.5e-7D, 4, 0.001D, 5, 9.9e-4D, 6, 1e7D, 7,
           9999999.0D, 8, 4.9e-324D, 9, 1.7976931348623157e308D, 10, 0.30000000000000004D, 11,
           -2.5D, 12, 1.23456789125e8D, 13) AS dbl,
       map(CAST(0.1 AS FLOAT), 1, CAST(1e10 AS FLOAT), 2, CAST(1.4e-45 AS FLOAT), 3,
           CAST('NaN' AS FLOAT), 4, CAST(16777216 AS FLOAT), 5, CAST(3.4e38 AS FLOAT), 6,
           CAST(9.9e-4 AS FLOAT), 7) AS flt,
       map(CAST(1.5 AS DECIMAL(10, 4)), 1, CAST(-1e-7 AS DECIMAL(20, 10)), 2,
           CAST(0 AS DECIMAL(20, 10)), 3) AS dec,
       map(true, 1, false, 2) AS flag,
       map(CAST(-128 AS TINYINT), 1) AS tiny,
       map(9223372036854775807L, 'max') AS big,
       map(INTERVAL '1 02:03:04.5' DAY TO SECOND, 1) AS span,
       map('k"\\', map(1.5D, 'nested')) AS nested,
       map(X'00FF10', 1, X'', 2) AS bin,
       map(named_struct('a', 1, 'b', 'x'), 1) AS pair,
       map(array(1, 2), 1) AS arr
FROM range(1)
"""
#: Spark writes a binary, struct or array key as a JVM object (``[B@1b2c3d``, an UnsafeRow's
#: words): the sink writes base64 (as binary values) and the key's JSON, computed here by Spark.
EXPECTED_SQL = """
SELECT to_json(struct(day, ts, ntz, special, dbl, flt, dec, flag, tiny, big, span, nested,
                      transform_keys(bin, (k, v) -> base64(k)) AS bin,
                      transform_keys(pair, (k, v) -> to_json(k)) AS pair
                      {arr})) AS j
FROM ({query})
"""


def _spark_json(spark, query: str, arr: bool = True) -> list[bytes]:
    """Spark's ``to_json`` of each row of ``query``'s map columns (see EXPECTED_SQL)."""
    sql = EXPECTED_SQL.format(
        query=query, arr=", transform_keys(arr, (k, v) -> to_json(k)) AS arr" if arr else "")
    return [r.j.encode("utf-8") for r in spark.sql(sql).collect()]


@pytest.fixture(scope="module")
def map_rows(spark):
    """MAP_KEYS_SQL in a session time zone other than UTC: (Spark's expected JSON lines, the
    rows as Arrow record batches, the rows as PySpark Rows without ``arr`` (PySpark cannot
    collect array keys) and their expected lines)."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        expected = _spark_json(spark, MAP_KEYS_SQL)
        df = spark.sql(MAP_KEYS_SQL)
        batches = df.toArrow().to_batches()
        rows_df = df.drop("arr")
        rows = (rows_df.schema, rows_df.collect(), _spark_json(spark, MAP_KEYS_SQL, arr=False))
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    return expected, batches, rows


def test_spark_writes_map_keys_as_their_internal_value(map_rows):
    """What the sink matches: Spark's JSON writer writes dates as days and timestamps as
    microseconds since the epoch (whatever the session time zone), floats as Java does."""
    keys = json.loads(map_rows[0][0])
    assert list(keys["day"]) == ["15707", "-1", "-719162"]
    assert list(keys["ts"]) == ["1357017301250000", "-1"]
    assert list(keys["special"]) == ["NaN", "Infinity", "-Infinity", "0.0"]
    assert "1.0E15" in keys["dbl"] and "9.9E-4" in keys["flt"]


@pytest.mark.parametrize("by_column", [True, False], ids=["by-column", "by-row"])
def test_map_keys_as_spark_writes_them(map_rows, by_column):
    """Maps keyed by dates, timestamps, NaN and other floats, decimals, booleans, intervals,
    binary, structs and arrays: each encoder writes the bytes of Spark's ``to_json``."""
    expected, batches, _ = map_rows
    encode = _encoder("json", by_column=by_column)
    assert [line for batch in batches for line in encode(batch)] == expected


def test_map_keys_of_rows_as_spark_writes_them(map_rows):
    """PySpark 4.0's streaming writer gives Rows (map keys as Python values, struct keys as
    Rows, in PySpark's order): the same keys and values."""
    _, _, (schema, rows, expected) = map_rows
    assert [json.loads(r) for r in _encoder("json", schema)(rows)] == \
        [json.loads(r) for r in expected]


def test_map_keys_written_through_the_sink(spark, log_server):
    """A DataFrame with maps keyed by every type is written by Spark tasks through the sink
    (it failed every task before): the records are Spark's ``to_json`` of the rows."""
    topic = "sink-maps-" + uuid.uuid4().hex[:12]
    spark.sql(MAP_KEYS_SQL).coalesce(1).write.format("rsocket").mode("append") \
        .options(endpoints=log_server.endpoint, topic=topic).save()
    log = StreamLog(log_server.dbs[0])
    try:
        got = [data for _, data in log.read(topic, 0)]
    finally:
        log.close()
    assert got == _spark_json(spark, MAP_KEYS_SQL)


def test_negative_zero_key(spark):
    """``map()`` in SQL turns a -0.0 key into 0.0; a map built in Python keeps it."""
    df = spark.createDataFrame([({-0.0: 1},)], "m map<double, int>")
    expected = [r.j.encode() for r in df.selectExpr("to_json(struct(m)) AS j").collect()]
    assert expected == [b'{"m":{"-0.0":1}}']
    for by_column in (True, False):
        assert _encoder("json", by_column=by_column)(df.toArrow().to_batches()[0]) == expected


# -- floats ------------------------------------------------------------------------------------

#: (value, float32?, the JSON text both encoders write: Python's repr, null for NaN and inf)
FLOATS = [
    (1e15, False, b"1000000000000000.0"), (9999999999999998.0, False, b"9999999999999998.0"),
    (1e16, False, b"1e+16"), (1.2345678901234567e19, False, b"1.2345678901234567e+19"),
    (1e300, False, b"1e+300"), (1.7976931348623157e308, False, b"1.7976931348623157e+308"),
    (1.5e-7, False, b"1.5e-07"), (1e-5, False, b"1e-05"), (1.234e-5, False, b"1.234e-05"),
    (1e-4, False, b"0.0001"), (5e-324, False, b"5e-324"), (-1.5e-10, False, b"-1.5e-10"),
    (-0.0, False, b"-0.0"), (0.0, False, b"0.0"), (2.0, False, b"2.0"),
    (123456.0, False, b"123456.0"), (0.1, False, b"0.1"), (-7.25, False, b"-7.25"),
    (float("nan"), False, b"null"), (float("inf"), False, b"null"),
    (float("-inf"), False, b"null"), (None, False, b"null"),
    (0.1, True, b"0.10000000149011612"), (1e-5, True, b"9.999999747378752e-06"),
    (3e38, True, b"3.0000000054977558e+38"), (1e10, True, b"10000000000.0"),
    (float("nan"), True, b"null"),
]


def _float_batch(values, single: bool):
    return pa.RecordBatch.from_pydict(
        {"x": pa.array(values, pa.float32() if single else pa.float64())})


@pytest.mark.parametrize("by_column", [True, False], ids=["by-column", "by-row"])
def test_float_golden(by_column):
    """Large and small exponents, -0.0, NaN and infinities, float32: the same bytes from the
    column-wise and the row-by-row encoder."""
    encode = _encoder("json", by_column=by_column)
    for single in (False, True):
        cases = [(v, text) for v, s, text in FLOATS if s == single]
        got = encode(_float_batch([v for v, _ in cases], single))
        assert got == [b'{"x":' + text + b"}" for _, text in cases]


@given(st.lists(st.one_of(st.none(), st.floats()), max_size=40), st.booleans())
def test_float_encoders_agree(values, single):
    if single:
        values = [None if v is None else float(pa.scalar(v, pa.float32()).as_py())
                  for v in values]
    batch = _float_batch(values, single)
    by_column = _encoder("json")(batch)
    assert by_column == _encoder("json", by_column=False)(batch)
    assert [json.loads(r)["x"] for r in by_column] == \
        [v if v is not None and math.isfinite(v) else None for v in values]


def test_spark_reads_float_texts_back(spark):
    """Spark writes floats as Java does (``1.0E15``); the sink writes Python's form
    (``1000000000000000.0``, ``1e+16``), which Spark's JSON reader reads as the same doubles."""
    values = [v for v, single, _ in FLOATS if not single and v is not None and math.isfinite(v)]
    lines = _encoder("json")(_float_batch(values, False))
    df = spark.createDataFrame([(line.decode(),) for line in lines], "j string")
    got = [r.x for r in df.selectExpr("from_json(j, 'x double').x AS x").collect()]
    assert [math.copysign(1.0, v) for v in got] == [math.copysign(1.0, v) for v in values]
    assert got == values
    spark_texts = spark.createDataFrame([(v,) for v in values[:3]], "x double") \
        .selectExpr("to_json(struct(x)) AS j").collect()
    assert [r.j for r in spark_texts] == ['{"x":1.0E15}', '{"x":9.999999999999998E15}',
                                          '{"x":1.0E16}']
