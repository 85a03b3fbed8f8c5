"""Distribution-list calls: requests, replies, and daemons too old for lists."""

from __future__ import annotations

import pytest
from client_kit import run_call

from qmgr.client import ConnectionLost, DistributionList, NotSupported
from qmgr.client.calls import lists
from wire import client as cf

LISTED = cf.ListInfoList(lists=(cf.ListInfo(name="all", targets=("a", "b")),))


def test_each_call_sends_its_request() -> None:
    created = run_call(lists.create_list, "all", iter(["a", "b"]), answers=[cf.Ok()])
    assert created.requests == [cf.CreateList(name="all", targets=("a", "b"))]
    added = run_call(lists.add_to_list, "all", "c", "d", answers=[cf.Ok(value=4)])
    assert (added.requests, added.result) == ([cf.ChangeList(name="all", add=("c", "d"))], 4)
    removed = run_call(lists.remove_from_list, "all", "a", answers=[cf.Ok(value=3)])
    assert (removed.requests, removed.result) == ([cf.ChangeList(name="all", remove=("a",))], 3)
    deleted = run_call(lists.delete_list, "all", answers=[cf.Ok()])
    assert (deleted.requests, deleted.result) == ([cf.DeleteList(name="all")], None)


def test_lists_become_values() -> None:
    assert run_call(lists.lists, answers=[LISTED]).result == [DistributionList("all", ("a", "b"))]
    one = run_call(lists.get_list, "all", answers=[LISTED])
    assert (one.requests, one.result) == (
        [cf.GetLists(name="all")],
        DistributionList("all", ("a", "b")),
    )
    with pytest.raises(ConnectionLost, match="not ListInfoList"):
        run_call(lists.lists, answers=[cf.Ok()])
    with pytest.raises(ValueError):  # get_list of a reply without exactly one list
        run_call(lists.get_list, "all", answers=[cf.ListInfoList(lists=())])


@pytest.mark.parametrize(
    ("call", "args"),
    [
        (lists.create_list, ("l",)),
        (lists.add_to_list, ("l", "a")),
        (lists.remove_from_list, ("l", "a")),
        (lists.delete_list, ("l",)),
        (lists.lists, ()),
        (lists.get_list, ("l",)),
    ],
)
def test_an_older_daemon_is_told_apart(call: object, args: tuple[object, ...]) -> None:
    name = call.__name__  # type: ignore[attr-defined]
    with pytest.raises(NotSupported, match=rf"{name}\(\) needs"):
        run_call(call, *args, version=cf.OUTCOMES_VERSION - 1)  # type: ignore[arg-type]
