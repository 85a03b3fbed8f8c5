"""A Spark standalone cluster on this machine, and a Python for it that has no qmgr.

:func:`worker_python` makes a virtual environment (``python -m venv``,
nothing downloaded) whose ``site-packages`` holds links to the installed
distributions PySpark's SQL needs (pyspark, pyarrow, pandas and what they
require, as their metadata says) and nothing else: no qmgr, no construct,
none of qmgr's other dependencies. Jobs run with it as ``PYSPARK_PYTHON``
find qmgr only where ``--py-files`` puts it.

:class:`StandaloneCluster` starts a master and workers from the pyspark
wheel alone (``$SPARK_HOME/bin/spark-class
org.apache.spark.deploy.master.Master`` and ``...worker.Worker``, with
``SPARK_HOME`` the pyspark package), on 127.0.0.1 and free ports, each in a
session of its own, and stops them by their process ids (SIGTERM, then
SIGKILL to the process group, which holds a worker's executors). The
processes get an environment without ``PYTHONPATH``, so nothing of the
repository reaches them. :meth:`StandaloneCluster.submit` runs
``spark-submit`` against the master.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from helpers import free_port
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

#: What the workers' Python has: PySpark's SQL and what it needs.
WORKER_DISTRIBUTIONS: Final = ("pyspark", "pyarrow", "pandas")
#: Seconds the master and workers have to start, and to stop after SIGTERM.
START_TIMEOUT: Final = 60.0
STOP_TIMEOUT: Final = 20.0
#: Java options for every JVM of the cluster: small, quick to start, one compiler tier.
JAVA_OPTIONS: Final = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def spark_home() -> Path:
    """The pyspark package's directory: it holds ``bin/spark-class`` and Spark's jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _closure(names: Sequence[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``names`` and, recursively, what they require."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found[name] = distribution
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return list(found.values())


def worker_python(directory: Path) -> Path:
    """A Python with pyspark, pyarrow and pandas but not qmgr, in ``directory``; its path.

    Raises:
        AssertionError: it can import qmgr or construct, or not pyspark, pyarrow and pandas.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True)
    python = directory / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    for distribution in _closure(WORKER_DISTRIBUTIONS):
        root = Path(str(distribution.locate_file("")))
        tops = {Path(str(file)).parts[0] for file in distribution.files or []}
        for top in sorted(tops - {".."}):
            link = Path(site) / top
            if not link.exists() and (root / top).exists():
                link.symlink_to(root / top)
    check = (
        "import importlib.util as u, pyspark, pyarrow, pandas\n"
        "assert u.find_spec('qmgr') is None and u.find_spec('construct') is None\n"
    )
    result = subprocess.run(
        [str(python), "-c", check], cwd=directory, env=clean_environment(), capture_output=True
    )
    assert result.returncode == 0, f"the workers' Python is not as it should be: {result.stderr!r}"
    return python


def clean_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without what would hand Spark's processes this
    repository or this Python (``PYTHONPATH``, ``PYSPARK_*``, ``SPARK_*``), plus ``extra``."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYSPARK_", "SPARK_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",  # this host's name may resolve to another address
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS=JAVA_OPTIONS,
    )
    env.update(extra or {})
    return env


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers on 127.0.0.1 (see the module).

    Attributes:
        master: ``spark://127.0.0.1:PORT``.
        python: the Python that the driver and the executors run.
    """

    def __init__(
        self, directory: Path, python: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g"
    ) -> None:
        self.directory = directory
        self.python = python
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.ui_port = free_port()
        self.master = f"spark://127.0.0.1:{self.port}"
        self.processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        directory.mkdir(parents=True, exist_ok=True)
        self.env = clean_environment(
            {
                "SPARK_LOCAL_DIRS": str(directory / "local"),
                "PYSPARK_PYTHON": str(python),
                # The master's REST submission server would take port 6066, fixed.
                "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            }
        )

    def _spawn(self, name: str, arguments: list[str]) -> None:
        command = [str(spark_home() / "bin" / "spark-class"), *arguments]
        with (self.directory / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=dict(self.env, SPARK_HOME=str(spark_home())),
                cwd=self.directory,
                start_new_session=True,
            )
        self.processes.append((name, process))

    def start(self) -> None:
        """Start the master, then the workers once it answers (a worker's web UI takes
        a free port of its own, which could otherwise be the one chosen for the
        master's); return once every worker has registered."""
        self._spawn(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(self.port), "--webui-port", str(self.ui_port)],
        )  # fmt: skip
        self._wait_for(lambda: self.master_state() is not None, "the master did not answer")
        for number in range(1, self.workers + 1):
            self._spawn(
                f"worker{number}",
                ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                 "--webui-port", "0", "--cores", str(self.cores), "--memory", self.memory,
                 "--work-dir", str(self.directory / f"worker{number}"), self.master],
            )  # fmt: skip
        self._wait_for(lambda: self.alive_workers() >= self.workers, "the workers did not register")

    def _wait_for(self, done: Callable[[], bool], failure: str) -> None:
        """Poll ``done`` until it holds, while every process runs, for ``START_TIMEOUT``."""
        deadline = time.monotonic() + START_TIMEOUT
        while not done():
            for name, process in self.processes:
                assert process.poll() is None, f"the {name} exited:\n{self.log(name)}"
            assert time.monotonic() < deadline, f"{failure}:\n{self.logs()}"
            time.sleep(0.2)

    def master_state(self) -> dict[str, Any] | None:
        """The master's state as its web UI's ``/json/`` gives it, or None while it does
        not answer with it: while the master starts, its UI may answer that path with
        its HTML page before the JSON one is in place."""
        url = f"http://127.0.0.1:{self.ui_port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                state = json.loads(answer.read())
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def alive_workers(self) -> int:
        """Workers the master counts as alive (0 while it does not answer)."""
        state = self.master_state() or {}
        return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")

    def submit(
        self, arguments: Sequence[str], *, timeout: float, conf: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``spark-submit --master MASTER ... ARGUMENTS`` to its end (output captured).

        The driver runs :attr:`python` as well, in :attr:`directory`; its JVM and
        the executors get the cluster's Java options.
        """
        settings = {
            "spark.ui.enabled": "false",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.extraJavaOptions": JAVA_OPTIONS,
            "spark.executor.extraJavaOptions": JAVA_OPTIONS,
            "spark.executor.memory": "512m",
            **(conf or {}),
        }
        command = [str(spark_home() / "bin" / "spark-submit"), "--master", self.master]
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        process = subprocess.Popen(
            [*command, *arguments],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=dict(self.env, SPARK_HOME=str(spark_home())),
            cwd=self.directory,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            output, _ = process.communicate()
            msg = f"spark-submit ran over {timeout:g} s:\n{output[-6000:]}"
            raise AssertionError(msg) from None
        finally:
            _kill_group(process)  # whatever it left running
        return subprocess.CompletedProcess(process.args, process.returncode, output, "")

    def log(self, name: str) -> str:
        """What the master or a worker (``worker1``, ...) wrote."""
        path = self.directory / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def logs(self) -> str:
        """The end of every log of the cluster's processes."""
        return "\n".join(f"--- {name}\n{self.log(name)}" for name, _ in self.processes)

    def stop(self) -> None:
        """Stop every process by its id: SIGTERM, then SIGKILL to its process group."""
        for _, process in reversed(self.processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for _, process in reversed(self.processes):
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.1, deadline - time.monotonic()))
            _kill_group(process)
        self.processes.clear()


def _kill_group(process: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """SIGKILL the session ``process`` leads (it and what it started), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def standalone_cluster(
    directory: Path, python: Path, **sizes: int | str
) -> Iterator[StandaloneCluster]:
    """A started :class:`StandaloneCluster`, stopped on exit whatever happened."""
    cluster = StandaloneCluster(directory, python, **sizes)  # type: ignore[arg-type]
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
