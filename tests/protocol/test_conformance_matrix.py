"""docs/conformance.md stays true to the tests: every test it names exists, and every
row names a test or says why it has none."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "docs" / "conformance.md"
REFERENCE = re.compile(r"`(tests/[^`:]+\.py)::(\w+)`")
ROW = re.compile(r"^\| ([A-Z]\d+) \|")


def test_every_test_the_matrix_names_exists() -> None:
    text = MATRIX.read_text()
    references = set(REFERENCE.findall(text))
    assert len(references) > 50
    missing = []
    for path, name in sorted(references):
        source = ROOT / path
        defined: set[str] = set()
        if source.exists():
            tree = ast.parse(source.read_text())
            defined = {
                node.name
                for node in tree.body
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            }
        if name not in defined:
            missing.append(f"{path}::{name}")
    assert missing == []


def test_every_row_has_a_test_or_says_no_test() -> None:
    rows = [line for line in MATRIX.read_text().splitlines() if ROW.match(line)]
    assert len(rows) > 50
    ids = [ROW.match(line).group(1) for line in rows]  # type: ignore[union-attr]
    assert len(ids) == len(set(ids))
    for line in rows:
        last = line.rstrip(" |").rsplit("|", 1)[-1]
        assert REFERENCE.search(last) or "no test" in last, line
