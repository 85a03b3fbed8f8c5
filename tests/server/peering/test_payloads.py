"""The payloads of an outgoing queue's loaded entries (``qmgr.server.peering.payloads``):
kept within their byte budget, read from the store past it."""

from __future__ import annotations

from qmgr.server.peering.payloads import LoadedPayloads, Payload


class Store:
    """Payloads by lookup id, counting reads."""

    def __init__(self, payloads: dict[int, bytes]) -> None:
        self.payloads = payloads
        self.reads: list[int] = []

    def read(self, lookup_id: int) -> Payload | None:
        self.reads.append(lookup_id)
        return self.payloads.get(lookup_id)


def test_payloads_are_kept_within_the_budget_and_read_past_it() -> None:
    store = Store({1: b"a" * 40, 2: b"b" * 40, 3: b"c" * 10})
    loaded = LoadedPayloads(budget=60)
    for lookup_id, payload in store.payloads.items():
        loaded.add(lookup_id, payload, reports=False)
    assert (len(loaded), list(loaded), loaded.kept_bytes) == (3, [1, 2, 3], 50)
    assert [loaded.get(n, store.read) for n in (1, 2, 3)] == [b"a" * 40, b"b" * 40, b"c" * 10]
    assert store.reads == [2]  # only the one past the budget
    assert loaded.get(9, store.read) is None  # not loaded: not read either
    assert store.reads == [2]
    loaded.discard(1)
    assert (1 in loaded, loaded.kept_bytes) == (False, 10)
    loaded.add(4, b"d" * 50, reports=False)  # room again
    assert loaded.kept_bytes == 60


def test_an_entry_gone_from_the_store_has_no_payload() -> None:
    store = Store({})
    loaded = LoadedPayloads(budget=0)
    loaded.add(1, b"purged since", reports=True)
    assert loaded.get(1, store.read) is None


def test_only_entries_left_in_the_store_that_report_are_read_for_their_reports() -> None:
    store = Store({1: b"kept", 2: b"x" * 100, 3: b"y" * 100})
    loaded = LoadedPayloads(budget=10)
    loaded.add(1, store.payloads[1], reports=False)
    loaded.add(2, store.payloads[2], reports=True)
    loaded.add(3, store.payloads[3], reports=False)
    assert loaded.reporting(1, store.read) == b"kept"  # kept: the caller looks
    assert loaded.reporting(2, store.read) == b"x" * 100
    assert loaded.reporting(3, store.read) is None
    assert store.reads == [2]
    loaded.discard(2)
    assert loaded.reporting(2, store.read) is None
    assert store.reads == [2]
