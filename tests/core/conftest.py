"""Fixtures of the core's tests: cores over real temporary stores (``harness.CoreHarness``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from qmgr.core.limits import Limits

from .harness import CoreHarness

#: ``open_core(queues, limits=None)``: a core over a fresh store with ``queues``
#: created (name -> ``CoreHarness.create`` options).
OpenCore = Callable[..., CoreHarness]


@pytest.fixture
def open_core(tmp_path: Path) -> Iterator[OpenCore]:
    """Open cores over fresh stores in this test's directory, each with the
    queues named (name -> create options); every one is closed afterwards."""
    opened: list[CoreHarness] = []

    def open_(
        queues: Mapping[str, Mapping[str, Any]] | None = None, *, limits: Limits | None = None
    ) -> CoreHarness:
        harness = CoreHarness(tmp_path / f"store{len(opened)}", limits=limits)
        opened.append(harness)
        for name, options in (queues or {}).items():
            harness.create(name, **options)
        return harness

    yield open_
    for harness in opened:
        harness.close()


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    """A core with a transactional queue ``q``, a non-transactional ``plain`` and
    ``admin`` (for acknowledgments): the queues of the delivery-outcome tests
    (expiry, outcomes, FinalAcks). Modules that need other queues define their own."""
    return open_core({"q": {"transactional": True}, "plain": {}, "admin": {}})
