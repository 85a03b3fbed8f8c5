"""The forgetter (``qmgr.server.peering.forgets``): the removal of acknowledged entries."""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing
from peer_kit import Network, Node, is_data, wait_until

import storage
from qmgr.server.peering.forgets import FORGET_RETRY_SECONDS

from .conftest import QUEUE, bodies, deliver, start_pair


def refuse_forgets(
    node: Node, monkeypatch: pytest.MonkeyPatch, *, times: float = math.inf
) -> list[float]:
    """The first ``times`` forgets of outgoing entries ``node`` writes are refused,
    as by a full store; returns the list of when each was refused."""
    committer = node.committer
    submit = committer.submit
    refused: list[float] = []

    async def full_for_forgets(unit: storage.Unit, *, source: int = 0) -> storage.UnitOutcome:
        if isinstance(unit.ops[0], storage.ForgetOutgoing) and len(refused) < times:
            refused.append(trio.current_time())
            return storage.UnitOutcome.failed(unit, storage.StoreFull("commit: disk full"))
        return await submit(unit, source=source)

    monkeypatch.setattr(committer, "submit", full_for_forgets)
    return refused


async def test_a_forget_refused_by_a_full_store_is_tried_again(
    network: Network, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = await start_pair(network)
    refused = refuse_forgets(a, monkeypatch, times=2)
    expected = bodies(3)
    await a.send(b.remote(QUEUE), expected)
    await wait_until(lambda: len(refused) == 1, step=0.01)
    queue = a.outgoing_queue().queue_id
    assert a.depth(queue) == 3  # still held, not forgotten
    await deliver(a, b, expected)
    assert len(refused) == 2
    assert refused[1] - refused[0] == pytest.approx(FORGET_RETRY_SECONDS, abs=0.02)
    assert a.depth(queue) == 0
    assert network.channel(a, b).count(is_data) == 3  # forgotten, not sent again


async def test_forgets_refused_again_and_again_are_tried_once_a_pause_per_queue(
    network: Network, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = await start_pair(network)
    refused = refuse_forgets(a, monkeypatch)
    for i in range(6):  # six acknowledgments, a second apart, while the store is full
        await a.send(b.remote(QUEUE), bodies(1, prefix=f"b{i}-"))
        await wait_until(lambda n=i: len(refused) > n, step=0.01)
        await trio.sleep(1.0)
    before = len(refused)
    await trio.sleep(60.0)
    assert len(refused) - before == pytest.approx(60 / FORGET_RETRY_SECONDS, abs=1)
    assert a.depth(a.outgoing_queue().queue_id) == 6
