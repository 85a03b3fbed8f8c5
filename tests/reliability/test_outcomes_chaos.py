"""Delivery outcomes between two real queue managers under a crash: transactional
messages with random acknowledgment levels and timers are received, left to
expire, purged, or left alone at the destination, which is SIGKILLed and
restarted on the way. Each message ends in exactly one place (received, in its
destination queue, or in exactly one dead-letter queue), and the source's admin
queue gets exactly the acknowledgments each asked for, once."""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest
from helpers import Peers, remote_queue, wait_until

from qmgr.client import Acknowledge, Journal, Message, MessageClass, QueueManager, connect

MESSAGES = 36
TIMED = 3  # seconds to be received, for some of them


def everything(qm: QueueManager, queue: str) -> list[Message]:
    return qm.peek_range(queue, max=10_000)


@pytest.mark.parametrize("seed", [int(os.environ.get("QMGR_CHAOS_SEED", "0")) or 1709])
def test_each_message_ends_in_exactly_one_place_with_its_acknowledgments(
    peers: Peers, seed: int
) -> None:
    rng = random.Random(seed)
    print(f"seed {seed}")
    _, b, qa, _ = peers
    timed: set[bytes] = set()
    qa.create_queue("acks")
    with connect(b.address) as qb:
        qb.create_queue("orders", transactional=True)
    for start in range(0, MESSAGES, 4):
        with qa.begin() as tx:
            for index in range(start, start + 4):
                body = b"m%02d" % index
                ttbr = TIMED if rng.random() < 0.3 else None
                if ttbr:
                    timed.add(body)
                tx.send(
                    remote_queue(b, "orders"),
                    body,
                    acknowledge=Acknowledge.FULL_RECEIVE | Acknowledge.POS_ARRIVAL,
                    admin_queue="acks",
                    journal=Journal.DEADLETTER,
                    time_to_be_received=ttbr,
                )
            tx.commit()
    received: set[bytes] = set()
    with connect(b.address) as qb:
        wait_until(lambda: len(everything(qb, "orders")) == MESSAGES, timeout=30)
        for _ in range(MESSAGES // 3):
            with qb.begin() as tx:
                message = tx.receive("orders", timeout=5)
                assert message is not None
                if message.body in timed or rng.random() < 0.3:
                    tx.abort()  # back in the queue
                else:
                    tx.commit()
                    received.add(message.body)
    b.kill()
    b.start()
    with connect(b.address) as qb:
        for _ in range(3):
            message = qb.receive("orders", timeout=5)
            if message is not None and message.body not in timed:
                received.add(message.body)
            elif message is not None:
                # A timed one received in time: no timeout for it.
                received.add(message.body)
                timed.discard(message.body)
        purge = rng.random() < 0.5
        if purge:
            qb.purge_queue("orders")

        def settled() -> bool:
            left = {m.body for m in everything(qb, "orders")}
            dead = [m.body for m in everything(qa, "system$;deadxact")]
            gone = MESSAGES - len(received) - len(left)
            return len(dead) == gone and not (left & timed)

        wait_until(settled, timeout=60)
        in_queue = Counter(m.body for m in everything(qb, "orders"))
        dead_at_source = {m.body: m.message_class for m in everything(qa, "system$;deadxact")}
        dead_at_destination = everything(qb, "system$;deadxact")
    assert dead_at_destination == []
    for index in range(MESSAGES):
        body = b"m%02d" % index
        places = (body in received) + in_queue[body] + (body in dead_at_source)
        assert places == 1, (body, body in received, in_queue[body], dead_at_source.get(body))
        if body in dead_at_source:
            expected = MessageClass.NACK_Q_PURGED if purge else MessageClass.NACK_RECEIVE_TIMEOUT
            assert dead_at_source[body] in (expected, MessageClass.NACK_RECEIVE_TIMEOUT), body
    # The acknowledgments: every message arrived once; each one that left
    # its queue has exactly one final acknowledgment.
    wait_until(
        lambda: len(everything(qa, "acks")) >= MESSAGES + len(received) + len(dead_at_source),
        timeout=30,
    )
    acks = everything(qa, "acks")
    by_message: dict[str | None, list[int]] = {}
    for ack in acks:
        by_message.setdefault(ack.acknowledged_id, []).append(ack.message_class)
    assert len(by_message) == MESSAGES
    finals = Counter(
        tuple(sorted(c for c in classes if c != MessageClass.ACK_REACH_QUEUE))
        for classes in by_message.values()
    )
    arrivals = [classes.count(MessageClass.ACK_REACH_QUEUE) for classes in by_message.values()]
    assert arrivals == [1] * MESSAGES
    assert sum(finals.values()) == MESSAGES
    assert all(len(final) <= 1 for final in finals)
    assert finals[(MessageClass.ACK_RECEIVE,)] == len(received)
    assert finals[()] == sum(in_queue.values())
