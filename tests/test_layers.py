"""The layers, checked on the source: one-way imports between packages, no cycles, and
tests that mirror the tree.

Every module of every package is read with ``ast`` (relative imports resolved,
imports under ``if TYPE_CHECKING:`` counted like any other: a back-reference
for typing is still a back-reference), and two rules are checked:

* **one way**: each package may import only the packages below it
  (:data:`ALLOWED`, the map in docs/design.md), and never the third-party
  modules listed in :data:`FORBIDDEN` (the pure layers know no I/O, clock or log);
* **no cycles**: the graph of imports between modules has no cycle, the
  package ``__init__`` modules included (a module that imports its own
  package's ``__init__`` while the ``__init__`` imports it is a cycle).

A third rule keeps the tests findable: every module that defines a function
or method has ``tests/<package>/test_<module>.py`` (``qmgr/`` dropped, a
leading underscore too), unless :data:`TESTED_ELSEWHERE` says where and why.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The top-level packages of the product (tests, bench and fuzz are not layers).
TOP = ("wire", "storage", "qmgr", "pipelines")

#: Package -> the project packages it may import (besides itself and its own
#: subpackages). A package not listed here may import nothing of the project.
ALLOWED: dict[str, set[str]] = {
    "wire": set(),
    "storage": set(),
    "qmgr.protocol": {"wire"},
    "qmgr.core": {"wire", "storage"},
    "qmgr.certs": set(),
    "qmgr.config": {"wire", "qmgr.core", "qmgr.config_keys", "qmgr.host_addresses"},
    "qmgr.host_addresses": set(),
    "qmgr.config_keys": {"wire", "qmgr.core"},
    "qmgr.logs": set(),
    "qmgr.deferred": set(),
    "qmgr.texts": set(),
    "qmgr.socket_stream": set(),
    "qmgr.tcp": set(),
    "qmgr.server": {
        "wire",
        "storage",
        "qmgr.core",
        "qmgr.protocol",
        "qmgr.config",
        "qmgr.certs",
        "qmgr.socket_stream",
        "qmgr.tcp",
        "qmgr.logs",  # what could not be written of the log, for the metrics
    },
    # The HTTP adapter: what the daemon counts, the one authorization, TLS, the client
    # requests' operations (run without a session), and the SDK's values and JSON
    # shapes (those of ``qmgr --json``); no session, no peering internals, not the
    # daemon that builds it.
    "qmgr.server.http": {
        "wire",
        "storage",
        "qmgr.core",
        "qmgr.config",
        "qmgr.client",
        "qmgr.texts",
        "qmgr.server.client.authorization",
        "qmgr.server.client.needs",
        "qmgr.server.client.operations",
        "qmgr.server.admission",
        "qmgr.server.tls",
        "qmgr.server.timings",
    },
    "qmgr.client": {"wire", "qmgr.socket_stream", "qmgr.tcp"},
    "qmgr.spark": {"wire", "qmgr.client"},
    "qmgr.cli": {
        "wire",
        "qmgr.client",
        "qmgr.certs",
        "qmgr.config",
        "qmgr.deferred",
        "qmgr.logs",
        "qmgr.texts",
        "qmgr.server",
        "qmgr.core.tokens",
        "qmgr.core.permissions",
        "qmgr.core.names",
    },
    "qmgr": {"qmgr.cli"},  # qmgr/__init__.py and __main__.py
    "pipelines": {"qmgr.client", "qmgr.spark", "wire"},
}

#: Package -> third-party or standard modules it must never import.
FORBIDDEN: dict[str, set[str]] = {
    "wire": {"trio", "lmdb", "socket", "time", "structlog", "asyncio"},
    "storage": {"trio", "socket", "structlog", "asyncio"},
    # The core decides; it knows neither time, I/O, nor logging.
    "qmgr.core": {"trio", "socket", "time", "threading", "structlog", "logging", "asyncio", "lmdb"},
    # The protocol machines take events and ``now`` and return actions.
    "qmgr.protocol": {
        "trio",
        "socket",
        "time",
        "threading",
        "structlog",
        "logging",
        "asyncio",
        "lmdb",
    },
    "qmgr.client": {"lmdb"},
}
#: The HTTP server, Prometheus and template libraries: only the HTTP adapter speaks them.
HTTP_LIBRARIES = {"hypercorn", "starlette", "prometheus_client", "h11", "h2", "anyio", "jinja2"}
for _layer_name in ALLOWED:
    if _layer_name != "qmgr.server.http":
        FORBIDDEN[_layer_name] = FORBIDDEN.get(_layer_name, set()) | HTTP_LIBRARIES


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every module name ``module`` imports, relative imports resolved, with the line."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            yield target, node.lineno
            for alias in node.names:  # ``from . import module``
                if f"{target}.{alias.name}" in MODULES:
                    yield f"{target}.{alias.name}", node.lineno


def _layer(module: str) -> str:
    """The most specific entry of :data:`ALLOWED` that ``module`` belongs to."""
    best = ""
    for layer in ALLOWED:
        if (module == layer or module.startswith(layer + ".")) and len(layer) > len(best):
            best = layer
    assert best, f"{module} belongs to no layer of ALLOWED: add it"
    return best


def _within(name: str, prefixes: set[str]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        targets = set()
        for name, _ in _imported(module, path):
            while name and name not in MODULES:  # ``from pkg.mod import Name``
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        edges[module] = targets
    return edges


def test_every_module_belongs_to_a_layer() -> None:
    for module in MODULES:
        _layer(module)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_imports_go_one_way(layer: str) -> None:
    allowed = {layer} | ALLOWED[layer]
    forbidden = FORBIDDEN.get(layer, set())
    offenders = []
    for module, path in MODULES.items():
        if _layer(module) != layer:
            continue
        for name, line in _imported(module, path):
            if name == "qmgr":  # the top package holds only ``__version__``
                continue
            own = name.split(".")[0] in TOP
            if own and not _within(name, allowed) and not _within(name, _sublayers(layer)):
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
            if _within(name, forbidden):
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {name} (forbidden)")
    assert not offenders, "\n".join(offenders)


def _sublayers(layer: str) -> set[str]:
    """Layers inside ``layer`` (``qmgr`` holds the others: it may not import them
    unless listed, so only its own modules count)."""
    return {layer} if layer != "qmgr" else set()


def test_no_import_cycles() -> None:
    edges = _edges()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


#: Modules with logic whose tests cannot sit in their mirrored file, and where they are.
TESTED_ELSEWHERE: dict[str, str] = {
    # Both need a Spark session, which the Spark tests share (starting one takes seconds).
    "pipelines.delivery_report": "tests/spark/test_pipelines.py",
    "qmgr.spark._session": "tests/spark/test_pipelines.py (through pipelines' session())",
    # Starts a partner daemon, Spark and the jobs end to end: ``make pipeline``.
    "pipelines.run": "make pipeline",
}


def _mirrored(module: str) -> Path:
    parts = module.split(".")
    if parts[0] == "qmgr":
        parts = parts[1:]
    return ROOT.joinpath("tests", *parts[:-1], f"test_{parts[-1].lstrip('_')}.py")


def _has_logic(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in ast.walk(tree))


def test_each_module_with_logic_has_its_own_test_file() -> None:
    missing = [
        f"{path.relative_to(ROOT)}: {_mirrored(module).relative_to(ROOT)}"
        for module, path in MODULES.items()
        if path.name not in ("__init__.py", "__main__.py")
        and module not in TESTED_ELSEWHERE
        and _has_logic(path)
        and not _mirrored(module).exists()
    ]
    assert not missing, "modules without their test file:\n" + "\n".join(missing)
    assert all(module in MODULES for module in TESTED_ELSEWHERE)
