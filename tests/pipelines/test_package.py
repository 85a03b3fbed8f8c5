"""The zip for ``spark-submit --py-files`` (``pipelines.package``): what executors need of
qmgr, wire and construct, and nothing of the daemon."""

from __future__ import annotations

import zipfile
from pathlib import Path

from pipelines.package import SKIP, build


def test_the_zip_holds_the_client_side_and_nothing_of_the_daemon(tmp_path: Path) -> None:
    output = tmp_path / "dist" / "qmgr-spark.zip"
    count = build(output)
    with zipfile.ZipFile(output) as archive:
        names = archive.namelist()
        assert archive.testzip() is None
    assert count == len(names) == len(set(names))
    for needed in (
        "qmgr/__init__.py",
        "qmgr/client/__init__.py",
        "qmgr/spark/__init__.py",
        "wire/__init__.py",
        "construct/__init__.py",
    ):
        assert needed in names
    assert not [name for name in names if name.startswith(SKIP)]
    assert not [name for name in names if "__pycache__" in name]
    assert {name.split("/")[0] for name in names} == {"qmgr", "wire", "construct"}
    assert build(output) == count  # written again, the same
