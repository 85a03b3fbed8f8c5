"""The one-way import rule between packages, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# package -> top-level modules it must never import
FORBIDDEN = {
    "wire": {"qmgr", "storage", "trio", "lmdb", "socket", "time", "structlog", "asyncio"},
    "storage": {"qmgr", "wire", "trio", "socket", "structlog", "asyncio"},
    # The core decides; it knows neither time, I/O, logging, nor how the
    # client protocol carries its errors.
    "qmgr/core": {
        "trio",
        "socket",
        "time",
        "threading",
        "structlog",
        "logging",
        "asyncio",
        "lmdb",
        "qmgr.server",
        "qmgr.client",
        "wire.client_frames",
    },
    "qmgr/client": {"storage", "qmgr.core", "qmgr.server", "lmdb"},
    # The protocol machines take events and ``now`` and return actions: no
    # I/O, no clock, no store, no logging.
    "qmgr/protocol": {
        "trio",
        "socket",
        "time",
        "threading",
        "structlog",
        "logging",
        "asyncio",
        "lmdb",
        "storage",
        "qmgr.server",
        "qmgr.core",
        "qmgr.client",
    },
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_go_one_way(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in _imports(path):
            for banned in FORBIDDEN[package]:
                if name == banned or name.startswith(banned + "."):
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, "\n".join(offenders)
