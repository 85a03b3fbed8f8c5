"""A pickled ``QueueDataSource`` comes back in a Python without qmgr (``qmgr.spark._unpickle``).

The processes here are a Python with pyspark but not qmgr (as Spark's
workers are in ``test_spark_cluster.py``). One imports qmgr from the
``--py-files`` zip and pickles a data source with Spark's cloudpickle;
another, whose path has no qmgr, unpickles it: the data source brings the
zip onto the path itself, as in Spark's streaming source process.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from standalone_kit import clean_environment, worker_python

from pipelines import package

PICKLE = """
import sys
sys.path.insert(1, sys.argv[1])
from pyspark import cloudpickle
from qmgr.spark import QueueDataSource
source = QueueDataSource({"endpoint": "127.0.0.1:1802", "queue": "orders"})
open(sys.argv[2], "wb").write(cloudpickle.dumps(source))
"""

UNPICKLE = """
import json, sys
from pyspark import cloudpickle
source = cloudpickle.loads(open(sys.argv[1], "rb").read())
import qmgr
print(json.dumps([type(source).__name__, dict(source.options), qmgr.__file__]))
"""


def run(python: Path, script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-c", script, *args],
        cwd=cwd,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_data_source_unpickles_without_qmgr_on_the_path(tmp_path: Path) -> None:
    python = worker_python(tmp_path / "python")
    archive = tmp_path / "files" / "qmgr-spark.zip"
    package.build(archive)
    pickled = tmp_path / "source.pickle"
    made = run(python, PICKLE, str(archive), str(pickled), cwd=tmp_path)
    assert made.returncode == 0, made.stderr

    found = run(python, UNPICKLE, str(pickled), cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    name, options, origin = json.loads(found.stdout)
    assert name == "QueueDataSource"
    assert options == {"endpoint": "127.0.0.1:1802", "queue": "orders"}
    assert origin == f"{archive}/qmgr/__init__.py"

    # Without the zip where the pickling process had it, qmgr is not found: the same
    # error as before, not another.
    archive.rename(tmp_path / "elsewhere.zip")
    missing = run(python, UNPICKLE, str(pickled), cwd=tmp_path)
    assert missing.returncode != 0
    assert "No module named 'qmgr'" in missing.stderr
