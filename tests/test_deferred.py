"""Modules deferred while a library is imported (``qmgr.deferred``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import run_python

from qmgr.deferred import deferring

PROBE = "qmgr_deferred_probe"
USER = "qmgr_deferred_user"


@pytest.fixture
def modules(tmp_path: Path) -> Iterator[Path]:
    """A module whose import is seen (it appends to ``loads.txt``) and a library that
    imports it, on the path of this test alone."""
    (tmp_path / f"{PROBE}.py").write_text(
        "from pathlib import Path\n"
        "with open(Path(__file__).with_name('loads.txt'), 'a') as f:\n"
        "    f.write('loaded\\n')\n"
        "VALUE = 42\n"
    )
    (tmp_path / f"{USER}.py").write_text(
        f"import {PROBE}\n\ndef value():\n    return {PROBE}.VALUE\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path / "loads.txt"
    finally:
        sys.path.remove(str(tmp_path))
        for name in (PROBE, USER):
            sys.modules.pop(name, None)


def test_a_deferred_module_is_imported_at_its_first_use(modules: Path) -> None:
    with deferring(PROBE):
        import qmgr_deferred_user as user  # type: ignore[import-not-found]
    assert not modules.exists()  # the library imported a stand-in
    assert PROBE not in sys.modules  # the stand-in was there only during the import
    assert user.value() == 42
    assert modules.read_text() == "loaded\n"
    assert sys.modules[PROBE].VALUE == 42  # the real module, imported once
    assert user.value() == 42
    assert modules.read_text() == "loaded\n"


def test_a_deferred_module_used_during_the_import_is_the_real_one(modules: Path) -> None:
    with deferring(PROBE):
        import qmgr_deferred_user as user

        assert user.value() == 42
        import qmgr_deferred_probe as probe  # type: ignore[import-not-found]
    assert probe is sys.modules[PROBE]
    assert modules.read_text() == "loaded\n"


def test_a_module_kept_out_cannot_be_imported_during_the_block(modules: Path) -> None:
    with deferring(kept_out=(PROBE,)), pytest.raises(ImportError):
        import qmgr_deferred_user  # noqa: F401
    assert PROBE not in sys.modules
    assert not modules.exists()


def test_a_module_already_imported_is_left_as_it_is(modules: Path) -> None:
    import qmgr_deferred_probe as probe

    with deferring(PROBE, kept_out=(PROBE,)):
        import qmgr_deferred_user as user
    assert sys.modules[PROBE] is probe
    assert user.qmgr_deferred_probe is probe


def test_the_daemon_imports_structlog_and_construct_without_asyncio_pdb_or_rich() -> None:
    """In a fresh interpreter, as ``qmgr serve`` does first; what the libraries use
    of the deferred modules is still there, from the real ones."""
    code = (
        "import sys\n"
        "from qmgr.deferred import lean_libraries\n"
        "lean_libraries()\n"
        "print(sorted(m for m in ('asyncio', 'pdb', 'rich') if m in sys.modules))\n"
        "import construct.debug, structlog.stdlib, asyncio, pdb\n"
        "print(structlog.stdlib.asyncio.get_running_loop is asyncio.get_running_loop,\n"
        "      construct.debug.pdb.post_mortem is pdb.post_mortem)\n"
    )
    ran = run_python(code)
    assert ran.stdout == "[]\nTrue True\n", ran.stderr
