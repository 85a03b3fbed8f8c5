"""A model test of delivery outcomes on one queue manager: whatever happens to
them, transactional messages end in exactly one place (received, still in their
queue, or in exactly one dead-letter queue, or gone without a copy when they did
not ask for one), with exactly the acknowledgments their level asked for."""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from qmgr.core import names
from qmgr.core.outcomes import acknowledgment_wanted, correlation_of
from wire import MessageClass

from .harness import WALL, CoreHarness, messages

QUEUES = ("a", "b")
#: (acknowledge, journal, time to be received or None)
LEVELS = st.tuples(
    st.sampled_from([0, 0x01, 0x02, 0x08, 0x0E, 0x0F]),
    st.sampled_from([0, 1, 2, 3]),
    st.sampled_from([None, 5, 20]),
)

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.sampled_from(QUEUES), LEVELS),
        st.tuples(st.just("receive"), st.sampled_from(QUEUES), st.booleans()),
        st.tuples(st.just("purge"), st.sampled_from(QUEUES)),
        st.tuples(st.just("time"), st.sampled_from([3.0, 10.0, 30.0])),
        st.tuples(st.just("crash")),
        st.tuples(st.just("erase")),
    ),
    min_size=8,
    max_size=40,
)


@dataclass
class Sent:
    body: bytes
    queue: str
    acknowledge: int
    journal: int
    #: The correlation id its acknowledgments carry (its message id).
    correlation: bytes


@dataclass
class Model:
    sent: dict[bytes, Sent] = field(default_factory=dict)
    received: set[bytes] = field(default_factory=set)


def expire(qm: CoreHarness, wall: float) -> None:
    expiry = qm.core.expiry
    while True:
        step = expiry.step(wall, 7)
        for message, unit in zip(step.messages, step.units, strict=True):
            expiry.done(message, qm.write(unit))
        if not step.more:
            return


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps=STEPS)
def test_every_transactional_message_ends_in_exactly_one_place(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as tmp:
        qm = CoreHarness(Path(tmp) / "store")
        for queue in QUEUES:
            qm.create(queue, transactional=True)
        qm.create("acks")
        model = Model()
        wall = WALL
        counter = 0
        for step in steps:
            kind = step[0]
            if kind == "send":
                _, queue, (acknowledge, journal, ttbr) = step
                counter += 1
                body = b"m%d" % counter
                tx = qm.begin()
                qm.prepare(
                    queue,
                    body,
                    tx=tx,
                    acknowledge=acknowledge,
                    admin_queue="acks",
                    journal=journal,
                    time_to_be_received=0xFFFFFFFF if ttbr is None else ttbr,
                )
                assert qm.commit(tx) == [None]
                [stored] = [m for m in messages(qm, queue) if m.body == body]
                model.sent[body] = Sent(body, queue, acknowledge, journal, correlation_of(stored))
            elif kind == "receive":
                _, queue, commit = step
                tx = qm.begin()
                found = qm.take(queue, tx)
                if found is None:
                    qm.core.abort(tx)
                    continue
                if commit:
                    assert qm.commit(tx) == [None]
                    model.received.add(found[1])
                else:
                    qm.core.abort(tx)
            elif kind == "purge":
                qm.purge(step[1])
            elif kind == "time":
                wall += step[1]
                expire(qm, wall)
            elif kind == "crash":
                qm.crash()
            else:
                qm.erase_all(step=3)
        qm.erase_all(step=1000)
        check(qm, model)
        qm.close()


def check(qm: CoreHarness, model: Model) -> None:
    in_queues = Counter(m.body for queue in QUEUES for m in messages(qm, queue))
    dead = Counter(m.body for m in messages(qm, names.DEADXACT))
    dead_classes = {m.body: m.message_class for m in messages(qm, names.DEADXACT)}
    journal = Counter(m.body for m in messages(qm, names.SYSTEM_JOURNAL))
    acks: dict[bytes, list[int]] = {}
    by_id = {sent.correlation: body for body, sent in model.sent.items()}
    for ack in messages(qm, "acks"):
        acks.setdefault(by_id[ack.correlation_id], []).append(ack.message_class)
    assert messages(qm, names.DEADLETTER) == []
    for body, sent in model.sent.items():
        places = (body in model.received) + in_queues[body] + dead[body]
        asked = bool(sent.journal & 1)
        if body in model.received:
            assert places == 1, body
            assert journal[body] == (1 if sent.journal & 2 else 0), body
            fate = MessageClass.ACK_RECEIVE
        elif in_queues[body]:
            assert places == 1, body
            fate = None
        else:
            # Expired or purged: one dead-letter copy if it asked, else gone.
            assert places == (1 if asked else 0), body
            fate = dead_classes.get(body)
        expected = []
        if acknowledgment_wanted(sent.acknowledge, MessageClass.ACK_REACH_QUEUE):
            expected.append(MessageClass.ACK_REACH_QUEUE)
        classes = acks.get(body, [])
        if fate is not None and acknowledgment_wanted(sent.acknowledge, fate):
            expected.append(fate)
        if fate is None and body not in model.received and not in_queues[body]:
            # Gone without a copy: its NACK (if asked) is the only trace.
            nacks = [c for c in classes if c & 0x8000]
            assert len(nacks) <= 1, (body, classes)
            expected.extend(nacks)
        assert sorted(classes) == sorted(expected), (body, classes, expected)
