"""Bringing back a pickled data source in a Python process that has no qmgr on its path.

Why
---
Spark pickles the ``QueueDataSource`` instance on the driver and unpickles
it in Python processes it starts itself. With qmgr shipped as
``spark-submit --py-files qmgr-spark.zip`` rather than installed, each of
those processes finds qmgr only if Spark puts the zip on its ``sys.path``.
Executors' Python workers and the driver's planners of batch reads and
writes get it; the process that runs a *streaming* source on the driver
(``pyspark.sql.streaming.python_streaming_source_runner``) does not: Spark
(PySpark 4.3.0) tells it to look for the ``--py-files`` in a ``streaming_job``
directory under the driver's SparkFiles root, where nothing was copied, so
unpickling the data source fails with ``No module named 'qmgr'``
(``PYTHON_DATA_SOURCE_ERROR``) before any of qmgr's code runs.

How
---
:func:`by_value` registers this module with Spark's cloudpickle as one to
pickle *by value*: the function :func:`restore` travels in the pickle as
code, needing nothing but the standard library where it is unpickled. A
data source pickles itself (``__reduce__``) as a call of :func:`restore`
with its class's module and name, its attributes, and :func:`qmgr_archive`:
the zip qmgr was imported from in the pickling process, which runs on the
driver's host, as the streaming source's process does. :func:`restore`
imports the class; if qmgr cannot be found, it puts that archive on
``sys.path`` first. Processes that find qmgr anyway (installed, or the zip
put on their path by Spark) import it as usual.

Nothing here imports qmgr or pyspark at module level: :func:`restore` is
pickled with the globals it uses, and those must exist everywhere.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

__all__ = ["by_value", "qmgr_archive", "restore"]


def qmgr_archive() -> str | None:
    """The zip file this process imported qmgr from, or None if qmgr is not in a zip."""
    spec = getattr(sys.modules.get("qmgr"), "__spec__", None)
    origin = getattr(spec, "origin", None)
    if not origin:
        return None
    # A package imported from a zip: ARCHIVE/qmgr/__init__.py.
    archive = os.path.dirname(os.path.dirname(origin))
    return archive if os.path.isfile(archive) else None


def restore(archive: str | None, module: str, name: str, state: dict[str, Any]) -> Any:
    """The instance of ``module.name`` with attributes ``state``.

    If ``module`` cannot be imported as the path stands, ``archive`` (a zip
    holding qmgr, when it exists here) is added to ``sys.path`` first.

    Raises:
        ModuleNotFoundError: qmgr is neither importable nor in ``archive``.
    """
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module.partition(".")[0] or not archive or not os.path.isfile(archive):
            raise
        if archive not in sys.path:
            sys.path.insert(1, archive)
        importlib.invalidate_caches()
        found = importlib.import_module(module)
    cls = getattr(found, name)
    instance = cls.__new__(cls)
    instance.__dict__.update(state)
    return instance


def by_value() -> None:
    """Have Spark's cloudpickle pickle this module's functions as code (once per process)."""
    from pyspark import cloudpickle

    # A set: registering again changes nothing.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call,unused-ignore]
