"""Modules the daemon's libraries import but the daemon never uses: loaded only if used.

Theory of operation
-------------------
Some libraries import, when they are imported, modules that serve a part
of them the daemon never calls: structlog imports asyncio (for its asyncio
loggers: 1.5 MB of resident memory) and rich when it can (for tracebacks
the daemon formats before any renderer sees them: 4 MB with pygments);
construct imports pdb (for its debugging construct). On a host that runs
many queue managers, every idle daemon would carry them.

:func:`deferring` imports a library with some of those modules **deferred**:
while the library is imported, ``sys.modules`` holds a stand-in for each,
so that ``import asyncio`` in the library binds the stand-in; the stand-in's
first attribute read imports the real module and answers from it. Others
are **kept out**: ``import rich`` fails in the library, which it expects
(it is an optional dependency of structlog). The stand-ins leave
``sys.modules`` when the import ends: whatever imports those modules later
gets the real ones, and a module already imported is never replaced.

:func:`lean_libraries` imports structlog and construct that way; ``qmgr
serve`` calls it before anything else imports them.

A stand-in serves a library that imports the module whole (``import
asyncio``), as structlog 26 and construct 2.10 do. A library that imported
a submodule of a deferred package within the block (``import
asyncio.events``) would load that submodule twice: a module is deferred
only where that is known not to happen (``tests/test_deferred.py`` checks
the libraries in use).
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["deferring", "lean_libraries"]


class _StandIn(types.ModuleType):
    """A module imported only when one of its attributes is first read."""

    def __getattr__(self, name: str) -> Any:
        if sys.modules.get(self.__name__) is self:  # read during the import: the real one now
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)


@contextmanager
def deferring(*deferred: str, kept_out: tuple[str, ...] = ()) -> Iterator[None]:
    """Within the block, ``import NAME`` of a name in ``deferred`` gives a stand-in
    that imports the module at its first use, and of one in ``kept_out`` fails
    (see the module docstring). Modules already imported are left as they are."""
    placed: dict[str, types.ModuleType | None] = {}
    for name in deferred:
        if name not in sys.modules:
            placed[name] = _StandIn(name)
    for name in kept_out:
        if name not in sys.modules:
            placed[name] = None
    sys.modules.update(placed)  # type: ignore[arg-type]  # None: import fails
    try:
        yield
    finally:
        for name, module in placed.items():
            if name in sys.modules and sys.modules[name] is module:
                del sys.modules[name]


def lean_libraries() -> None:
    """Import structlog and construct without what the daemon never uses of theirs."""
    with deferring("asyncio", "pdb", kept_out=("rich",)):
        import construct  # noqa: F401  # its debugger imports pdb
        import structlog  # noqa: F401  # its asyncio loggers import asyncio; its tracebacks, rich
