"""What the benchmark scripts print: progress on a terminal, a table of measures, TLS
figures next to plain ones, and the JSON object of ``--json``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

#: The columns of :func:`print_table` (the last one, notes, has no heading).
HEADER = ("measure", "result", "vs ceiling", "")


def progress(text: str) -> None:
    """Show ``text`` in place of the last progress line, if stderr is a terminal."""
    if sys.stderr.isatty():
        print(f"\r\x1b[K{text}", end="", file=sys.stderr, flush=True)


def print_table(
    title: str,
    rows: Sequence[tuple[str, str, str, str]],
    out: TextIO,
    header: tuple[str, str, str, str] = HEADER,
) -> None:
    """``title``, then ``rows`` under ``header``, each column aligned."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    print(title, file=out)
    for row in [header, *rows]:
        line = f"  {row[0]:<{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}"
        print(line.rstrip(), file=out)


def tls_x_plain(
    plain: dict[str, Any], tls: dict[str, Any], figures: Iterable[str]
) -> dict[str, float]:
    """Each of ``figures`` with TLS as a ratio to the same without (where both were measured)."""
    return {
        figure: round(tls[figure] / plain[figure], 4)
        for figure in figures
        if plain[figure] and tls[figure]
    }


def print_tls_x_plain(ratios: dict[str, float], out: TextIO) -> None:
    """The ratios of :func:`tls_x_plain`, a line each."""
    for figure, ratio in ratios.items():
        print(f"  {figure}: TLS {ratio:.2f} x plain", file=out)


def dump_json(result: dict[str, Any]) -> None:
    """``result`` as one JSON object on stdout."""
    json.dump(result, sys.stdout, indent=2)
    print()
