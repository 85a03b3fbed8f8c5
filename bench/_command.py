"""The command line of the benchmark scripts that run daemons in a work directory:
a parser that shows the script's docstring as written, the options
``--data-dir``, ``--keep`` and ``--json``, the run in a fresh work directory
(kept when the run fails or ``--keep`` asks), and where the report goes
(stdout, or stderr next to ``--json``'s object on stdout).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

from _daemon import fresh_workdir
from _report import dump_json

T = TypeVar("T")


def script_parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser that shows the script's docstring ``doc`` as written."""
    return argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def add_run_options(parser: argparse.ArgumentParser, where: str, keep: str) -> None:
    """``--data-dir`` (``where``: what goes there), ``--keep`` (``keep``: what it keeps)
    and ``--json``."""
    add = parser.add_argument
    add("--data-dir", type=Path, default=Path("var/bench"), help=f"where {where}")
    add("--keep", action="store_true", help=f"keep {keep}")
    add("--json", action="store_true", help="print one JSON object (the table goes to stderr)")


def run_in_workdir(
    args: argparse.Namespace,
    kept: str,
    run: Callable[[Path], T],
    *,
    on_failure: Callable[[], object] = lambda: None,
) -> T:
    """``run`` in a fresh directory under ``--data-dir``, removed afterwards unless
    ``--keep``; when ``run`` raises, ``on_failure`` is called and the directory is
    kept. ``kept`` names what is in it (``stores and logs``)."""
    workdir = fresh_workdir(args.data_dir)
    try:
        result = run(workdir)
    except BaseException:
        on_failure()
        print(f"failed; {kept} kept in {workdir}", file=sys.stderr)
        raise
    finish_workdir(args, kept, workdir)
    return result


def finish_workdir(args: argparse.Namespace, kept: str, workdir: Path) -> None:
    """After a run that went through: say where ``workdir`` is with ``--keep``, else remove it."""
    if args.keep:
        print(f"{kept} kept in {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)


def report_out(args: argparse.Namespace) -> TextIO:
    """Where the table goes: stderr with ``--json``, else stdout."""
    return sys.stderr if args.json else sys.stdout


def publish(
    args: argparse.Namespace,
    result: dict[str, Any],
    report: Callable[[dict[str, Any], TextIO], None],
) -> None:
    """The table of ``report`` (see :func:`report_out`), and with ``--json`` the JSON object."""
    report(result, report_out(args))
    if args.json:
        dump_json(result)
