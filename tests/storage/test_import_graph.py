"""The storage package's imports go one way: no cycle (counting imports made
only for typing and relative ones), no module imports the package back, and
the core never imports an operation module but for the ``Store`` facade."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "storage"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str) -> set[str]:
    """The storage modules ``name`` imports, wherever the import statement stands."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


GRAPH = {name: imported(name) for name in MODULES}


def test_the_modules_import_each_other_without_a_cycle() -> None:
    try:
        order = list(TopologicalSorter(GRAPH).static_order())
    except CycleError as exc:  # pragma: no cover - the failure message
        pytest.fail(f"import cycle: {exc.args[1]}")
    assert set(order) == set(MODULES)


def test_no_module_imports_the_package_back() -> None:
    assert [name for name, deps in GRAPH.items() if "storage" in deps] == []


def test_the_core_imports_no_operation_module_but_for_the_store_facade() -> None:
    core = [name for name in MODULES if not name.startswith("storage.ops")]
    offenders = {
        name: sorted(dep for dep in GRAPH[name] if dep.startswith("storage.ops"))
        for name in core
        if name not in ("storage", "storage.store")
    }
    assert {name: deps for name, deps in offenders.items() if deps} == {}
