"""Fixtures of the storage tests (their helpers are in ``store_kit``).

Stores are opened with ``durable=False`` (no sync) unless a test is about
durability, and every store a test opens is closed when it ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_kit import Reopener, StoreOpener

from storage import Store


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """The directory of the test's store (not created yet)."""
    return tmp_path / "qm"


@pytest.fixture
def open_store(store_dir: Path) -> Iterator[StoreOpener]:
    """Open stores with ``durable=False`` by default; all are closed afterwards."""
    opened: list[Store] = []

    def open_(path: Path | None = None, **options: Any) -> Store:
        options.setdefault("durable", False)
        store = Store(store_dir if path is None else path, **options)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: StoreOpener) -> Store:
    """A new, empty, non-durable store."""
    return open_store()


@pytest.fixture
def reopen(open_store: StoreOpener) -> Reopener:
    """Close a store and open its directory again (``durable=False`` by default)."""

    def reopen_(store: Store, **options: Any) -> Store:
        store.close()
        return open_store(store.path, **options)

    return reopen_
