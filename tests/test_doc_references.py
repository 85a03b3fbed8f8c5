"""The tests the documents point at exist: every ``tests/PATH.py`` a document
names, and every ``tests/PATH.py::test_name`` (parameters aside).
docs/conformance.md is checked more closely by tests/protocol/test_conformance_matrix.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
REFERENCE = re.compile(r"(tests/[\w/]+\.py)(?:::(\w+))?")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_test_a_document_names_exists(document: Path) -> None:
    missing = []
    for match in REFERENCE.finditer(document.read_text(encoding="utf-8")):
        path, name = match.groups()
        test_file = ROOT / path
        if not test_file.is_file():
            missing.append(path)
        elif name and not re.search(rf"def {name}\b", test_file.read_text(encoding="utf-8")):
            missing.append(f"{path}::{name}")
    assert not missing, f"{document.name} names tests that do not exist: {missing}"
