"""Build ``dist/qmgr-spark.zip``: what Spark executors need of qmgr, for ``--py-files``.

    python -m pipelines.package [--output dist/qmgr-spark.zip]

The zip holds the ``qmgr`` package (the data source and the client SDK), the
``wire`` package, and ``construct``, the one library the client needs
besides the standard library. Executors still need pyarrow (PySpark's
Python data sources do); pyspark itself comes with Spark. Installing qmgr
on every node (``pip install 'qmgr[spark]'``) does the same.
"""

from __future__ import annotations

import argparse
import zipfile
from pathlib import Path

import construct

import qmgr
import wire

#: Parts of qmgr that executors never import (the daemon, its store, the command).
SKIP = ("qmgr/server/", "qmgr/core/", "qmgr/protocol/")


def build(output: Path) -> int:
    """Write the zip; return how many files it holds."""
    output.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in (qmgr, wire, construct):
            root = Path(str(package.__file__)).resolve().parent
            for path in sorted(root.rglob("*")):
                name = path.relative_to(root.parent).as_posix()
                if path.is_file() and "__pycache__" not in name and not name.startswith(SKIP):
                    archive.write(path, name)
                    count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=Path("dist/qmgr-spark.zip"))
    args = parser.parse_args()
    count = build(args.output)
    print(f"wrote {args.output} ({count} files): spark-submit --py-files {args.output} ...")


if __name__ == "__main__":
    main()
