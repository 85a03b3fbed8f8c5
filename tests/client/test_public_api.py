"""The SDK's public names, and the two clients' agreement: every method of the blocking
client exists in the trio client, awaited, with the same parameters."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import qmgr.client as sdk

TWINS = [
    (sdk.QueueManager, sdk.AsyncQueueManager),
    (sdk.Transaction, sdk.AsyncTransaction),
]


def _public(cls: type) -> dict[str, object]:
    return {
        name: inspect.getattr_static(cls, name)
        for name in dir(cls)
        if not name.startswith("_") or name in ("__init__",)
    }


def test_public_names() -> None:
    for name in sdk.__all__:
        assert getattr(sdk, name) is not None
        assert getattr(sdk, name).__doc__, name
    assert sdk.open_client.__name__ == "open_client"
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = sdk.nothing  # type: ignore[attr-defined]


def test_the_trio_client_is_imported_on_first_use() -> None:
    program = (
        "import sys, qmgr.client as c; assert 'trio' not in sys.modules; c.connect; "
        "assert 'trio' not in sys.modules; c.open_client; assert 'trio' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", program], check=True)


@pytest.mark.parametrize(("blocking", "trio_twin"), TWINS, ids=lambda cls: cls.__name__)
def test_the_twins_have_the_same_methods_and_parameters(blocking: type, trio_twin: type) -> None:
    ours, theirs = _public(blocking), _public(trio_twin)
    assert set(ours) - {"close", "__init__"} <= set(theirs)
    for name, member in ours.items():
        if name in ("close", "__init__"):
            continue  # open_client's block closes the trio client; the constructors wrap I/O
        twin = theirs[name]
        if not callable(member) and not isinstance(member, property):
            assert type(member) is type(twin), name  # a plain attribute (qm_name, ...)
            continue
        assert member.__doc__, name  # type: ignore[attr-defined]
        assert twin.__doc__, name  # type: ignore[attr-defined]
        if isinstance(member, property):
            assert isinstance(twin, property), name
            continue
        assert callable(member), name
        assert callable(twin), name
        ours_params = list(inspect.signature(member).parameters.values())
        theirs_params = list(inspect.signature(twin).parameters.values())
        assert [(p.name, p.kind, p.default) for p in ours_params] == [
            (p.name, p.kind, p.default) for p in theirs_params
        ], name
        if name != "begin":  # begin() is pipelined: nothing to await
            assert inspect.iscoroutinefunction(twin), name
