"""Distribution lists (``storage.ops.lists``): created, retargeted and deleted,
seen by the later operations of their batch, kept across a reopening, read in
name order, and their record's layout and corruption."""

from __future__ import annotations

import pytest
from store_kit import Reopener, commit, commit_ok, raw_lmdb, unit

from storage import (
    CreateList,
    DeleteList,
    DistributionList,
    InvalidRecord,
    ListExists,
    ListMissing,
    SetListTargets,
    Store,
    StoreCorrupt,
)
from storage.keys import DB_LISTS

SALES = DistributionList("sales", "Sales", ("DIRECT=TCP:10.0.0.1\\orders", "orders"))


def test_a_list_is_created_read_and_kept(store: Store, reopen: Reopener) -> None:
    commit_ok(store, unit(CreateList(SALES)))
    assert store.get_list("sales") == SALES
    store = reopen(store)
    assert store.get_list("sales") == SALES
    assert store.get_list("other") is None


def test_a_list_of_a_taken_name_is_list_exists_even_in_one_batch(store: Store) -> None:
    first, second = commit(store, unit(CreateList(SALES)), unit(CreateList(SALES)))
    assert first.error is None
    assert isinstance(second.error, ListExists)
    [again] = commit(store, unit(CreateList(SALES)))
    assert isinstance(again.error, ListExists)


def test_targets_are_replaced_and_the_display_name_kept(store: Store) -> None:
    commit_ok(store, unit(CreateList(SALES)), unit(SetListTargets("sales", ("a", "b", "c"))))
    assert store.get_list("sales") == DistributionList("sales", "Sales", ("a", "b", "c"))


def test_a_missing_list_cannot_be_retargeted_or_deleted(store: Store) -> None:
    retarget, delete = commit(store, unit(SetListTargets("x", ())), unit(DeleteList("x")))
    assert isinstance(retarget.error, ListMissing)
    assert isinstance(delete.error, ListMissing)


def test_a_deleted_list_is_gone_and_its_name_free_in_the_same_batch(store: Store) -> None:
    commit_ok(store, unit(CreateList(SALES)))
    renamed = DistributionList("sales", "SALES", ())
    commit_ok(store, unit(DeleteList("sales"), CreateList(renamed)))
    assert store.get_list("sales") == renamed
    commit_ok(store, unit(DeleteList("sales")))
    assert store.lists() == []
    assert DeleteList("sales").frees_space


def test_lists_are_read_in_name_order(store: Store) -> None:
    names = ["b", "a", "c"]
    commit_ok(store, *(unit(CreateList(DistributionList(n, n.upper(), (n,)))) for n in names))
    assert [value.name for value in store.lists()] == ["a", "b", "c"]


@pytest.mark.parametrize(
    "value",
    [
        DistributionList("long", "x" * 0x10000, ()),
        DistributionList("long", "L", ("t" * 0x10000,)),
        DistributionList("many", "M", ("t",) * 0x10000),
    ],
)
def test_texts_too_long_or_too_many_targets_are_invalid_records(
    store: Store, value: DistributionList
) -> None:
    [outcome] = commit(store, unit(CreateList(value)))
    assert isinstance(outcome.error, InvalidRecord)
    assert store.lists() == []


def test_the_record_layout_is_as_documented(store: Store) -> None:
    commit_ok(store, unit(CreateList(DistributionList("l", "Ab", ("xyz",)))))
    store.close()
    with raw_lmdb(store.path) as env:
        db = env.open_db(DB_LISTS, create=False)
        with env.begin() as txn:
            value = txn.get(b"l", db=db)
    assert value == b"\x01" + b"\x00\x02Ab" + b"\x00\x01" + b"\x00\x03xyz"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x02\x00\x00\x00\x00",
        b"\x01\x00\x05Ab",
        b"\x01\x00\x00\x00\x01\x00\x09x",
        b"\x01\x00\x00\x00\x00!",
    ],
)
def test_a_corrupt_record_is_store_corrupt(store: Store, reopen: Reopener, data: bytes) -> None:
    store.close()
    with raw_lmdb(store.path) as env:
        db = env.open_db(DB_LISTS, create=False)
        with env.begin(write=True) as txn:
            txn.put(b"bad", data, db=db)
    store = reopen(store)
    with pytest.raises(StoreCorrupt, match="'bad'"):
        store.get_list("bad")
    with pytest.raises(StoreCorrupt):
        store.lists()
