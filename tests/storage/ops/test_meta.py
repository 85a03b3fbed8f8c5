"""The store's meta values (``storage.ops.meta``): settings (set, cleared) and the
message-id ordinal limit."""

from __future__ import annotations

import pytest
from store_kit import (
    Reopener,
    commit_ok,
    put_raw,
    unit,
)

from storage import (
    ClearSetting,
    InvalidRecord,
    ReserveOrdinals,
    ReturnOrdinals,
    SetSetting,
    Store,
    StoreCorrupt,
)
from storage.keys import DB_META, setting_key


def test_reserve_ordinals_never_lowers_the_limit(store: Store, reopen: Reopener) -> None:
    assert store.ordinal_limit == 1
    commit_ok(store, unit(ReserveOrdinals(100)))
    assert store.ordinal_limit == 100
    commit_ok(store, unit(ReserveOrdinals(50)))
    assert store.ordinal_limit == 100
    commit_ok(store, unit(ReserveOrdinals(300)), unit(ReserveOrdinals(200)))
    assert store.ordinal_limit == 300
    store = reopen(store)
    assert store.ordinal_limit == 300
    commit_ok(store, unit(ReserveOrdinals(299)))
    assert reopen(store).ordinal_limit == 300


def test_settings_are_stored_replaced_and_kept(store: Store, reopen: Reopener) -> None:
    assert store.get_setting("missing") is None
    commit_ok(store, unit(SetSetting("name", "qm-日本")))
    commit_ok(store, unit(SetSetting("name", "qm-ünï"), SetSetting("other", "")))
    assert store.get_setting("name") == "qm-ünï"
    assert store.get_setting("other") == ""
    assert reopen(store).get_setting("name") == "qm-ünï"


def test_a_cleared_setting_reads_as_absent_and_clearing_only_frees_space(
    store: Store, reopen: Reopener
) -> None:
    commit_ok(store, unit(SetSetting("marks", "{}")))
    clear = ClearSetting("marks")
    assert clear.frees_space  # so a full store takes it
    commit_ok(store, unit(clear), unit(ClearSetting("never-set")))
    assert store.get_setting("marks") is None
    assert reopen(store).get_setting("marks") is None


@pytest.mark.parametrize("key", ["", "k" * 600])
def test_empty_or_too_long_setting_key_is_invalid_record(store: Store, key: str) -> None:
    [outcome] = store.commit([unit(SetSetting(key, "x"))], now=1.0)
    assert isinstance(outcome.error, InvalidRecord)
    with pytest.raises(InvalidRecord):
        store.get_setting(key)


def test_setting_that_is_not_utf8_is_corrupt(store: Store, reopen: Reopener) -> None:
    path = store.path
    store.close()
    put_raw(path, DB_META, setting_key("name"), b"\xff\xfe")
    with pytest.raises(StoreCorrupt, match="UTF-8"):
        reopen(store).get_setting("name")


def test_return_ordinals_never_raises_the_limit(store: Store, reopen: Reopener) -> None:
    commit_ok(store, unit(ReserveOrdinals(1000)))
    commit_ok(store, unit(ReturnOrdinals(2000)))
    assert store.ordinal_limit == 1000
    commit_ok(store, unit(ReturnOrdinals(7)))
    assert reopen(store).ordinal_limit == 7
