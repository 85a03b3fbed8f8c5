"""The registry of peer identities (``qmgr.server.peering.identity``) over a real store:
trust on first use, pinned identities, relays, and this queue manager's own GUID."""

from __future__ import annotations

import uuid
from pathlib import Path

import structlog
import trio
from peer_kit import StoreCommitter

import storage
from qmgr.server.peering.identity import SETTING_PREFIX, PeerIdentities

A = uuid.UUID("a0000000-0000-4000-8000-00000000000a")
B = uuid.UUID("b0000000-0000-4000-8000-00000000000b")


async def test_an_identity_speaks_for_the_first_guid_it_announces(tmp_path: Path) -> None:
    store = storage.Store(tmp_path / "store")
    log = structlog.get_logger("test")
    identities = PeerIdentities(store, pinned={}, relays=frozenset(), log=log)
    async with trio.open_nursery() as nursery:
        identities.attach(nursery, StoreCommitter(store))  # type: ignore[arg-type]
        assert identities.opened("qm-a", A) is None
        assert identities.opened("qm-a", A) is None
        refusal = identities.opened("qm-a", B)
    assert refusal is not None
    assert "speaks for" in refusal
    assert str(A) in refusal
    # The registration holds across restarts.
    assert store.get_setting(SETTING_PREFIX + "qm-a") == str(A)
    again = PeerIdentities(store, pinned={}, relays=frozenset(), log=log)
    assert again.guid_of("qm-a") == A
    assert again.opened("qm-a", B) is not None
    assert again.identities_of(A) == {"qm-a"}
    assert again.identities_of(B) == frozenset()
    # Nobody may speak for this queue manager's own GUID.
    refusal = again.opened("qm-new", store.qm_guid)
    assert refusal is not None
    assert "own GUID" in refusal
    assert again.guid_of("qm-new") is None
    store.close()


def test_pinned_identities_and_relays(tmp_path: Path) -> None:
    store = storage.Store(tmp_path / "store")
    identities = PeerIdentities(
        store, pinned={"qm-b": B}, relays=frozenset({"router"}), log=structlog.get_logger("test")
    )
    refusal = identities.opened("qm-b", A)
    assert refusal is not None
    assert "pinned" in refusal
    assert identities.opened("qm-b", B) is None
    assert store.get_setting(SETTING_PREFIX + "qm-b") is None  # pinned: nothing registered
    assert identities.may_carry("qm-b", B, B)
    assert not identities.may_carry("qm-b", B, A)
    assert identities.may_carry("router", A, B)
    assert identities.is_relay("router")
    store.close()
