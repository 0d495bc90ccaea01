"""A job run as ``venv/bin/python job.py`` without activating the virtual environment: Spark
starts its Python workers with the ``python3`` on ``PATH`` (no PYSPARK_PYTHON), which cannot
import pyspark_rsocket. Importing pyspark_rsocket before the SparkSession makes the workers run
the job's interpreter; without it Spark says DATA_SOURCE_NOT_FOUND (docs/spark.rst,
troubleshooting); :func:`pyspark_rsocket.check_worker_python` names the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from spark_support import publish

import pyspark_rsocket

REPO = Path(__file__).resolve().parents[2]

JOB = """\
import sys
if sys.argv[2] == "import":
    import pyspark_rsocket  # noqa: F401 - before the SparkSession: the workers run this python
from pyspark.sql import SparkSession

spark = (SparkSession.builder.master("local[1]").appName("venv-job")
         .config("spark.ui.enabled", "false")
         .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR").getOrCreate())
try:
    df = (spark.read.format("rsocket").option("endpoints", sys.argv[1])
          .option("topic", "venv-job").load())
    print("rows:", sorted(bytes(row.data).decode() for row in df.collect()))
except Exception as exc:
    print("error:", " ".join(str(exc).split())[:400])
finally:
    spark.stop()
"""


def unactivated_env(tmp_path: Path) -> dict[str, str]:
    """The environment of ``venv/bin/python job.py`` typed in a shell where the venv is not
    active: no PYSPARK_PYTHON, and a ``python3`` first on PATH that has no pyspark_rsocket
    (the base interpreter without site-packages)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    base = Path(sys.base_prefix, "bin", "python3")
    shim = bin_dir / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{base}" -S "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_an_unactivated_venv_job_finds_the_data_source(tmp_path, log_server):
    env = unactivated_env(tmp_path)
    assert subprocess.run(["python3", "-c", "import pyspark_rsocket"], env=env,
                          capture_output=True).returncode != 0  # the workers' python3
    publish(log_server.dbs[0], "venv-job", [b"a", b"b"])
    (tmp_path / "job.py").write_text(JOB)

    def job(mode: str) -> str:
        result = subprocess.run([sys.executable, "job.py", log_server.endpoints[0], mode],
                                cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=600)
        lines = [line for line in result.stdout.splitlines()
                 if line.startswith(("rows:", "error:"))]
        assert result.returncode == 0 and len(lines) == 1, result.stdout + result.stderr
        return lines[0]

    # Spark's own lookup alone fails: the case the docs' troubleshooting entry describes
    assert "DATA_SOURCE_NOT_FOUND" in job("plain")
    # importing pyspark_rsocket first: the lookup and the reading tasks run this interpreter
    assert job("import") == "rows: ['a', 'b']"


def test_check_worker_python_says_to_set_pyspark_python(tmp_path):
    env = unactivated_env(tmp_path)
    with pytest.raises(RuntimeError) as caught:
        pyspark_rsocket.check_worker_python(str(tmp_path / "bin" / "python3"))
    message = str(caught.value)
    assert f"PYSPARK_PYTHON={sys.executable}" in message
    assert "DATA_SOURCE_NOT_FOUND" in message and "cannot import pyspark_rsocket" in message
    with pytest.raises(RuntimeError, match="PYSPARK_PYTHON"):
        pyspark_rsocket.check_worker_python(str(tmp_path / "no-such-python"))
    pyspark_rsocket.check_worker_python(sys.executable)  # this one can
    # importing the module sets PYSPARK_PYTHON only where it is unset
    probe = "import os, pyspark_rsocket; print(os.environ.get('PYSPARK_PYTHON'))"
    found = subprocess.run([sys.executable, "-c", probe], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=120)
    assert found.stdout.strip() == sys.executable, found.stderr
    found = subprocess.run([sys.executable, "-c", probe], env={**env, "PYSPARK_PYTHON": "py3"},
                           cwd=REPO, capture_output=True, text=True, timeout=120)
    assert found.stdout.strip() == "py3", found.stderr
