"""Queue and transaction semantics, checked against a simple in-memory model.

Hypothesis drives the real core over a real (temporary) LMDB store with
random sequences of sends, receives, transactions, commits (alone or several
in one batch), aborts, purges, erase steps and crashes (the store is closed
and reopened with a fresh core, as after ``kill -9``), and after every step
compares what a reader can see with what the model says it should see.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from qmgr.core.errors import TransactionUsageError
from qmgr.core.sends import SendMode
from qmgr.core.transactions import Transaction

from .harness import CoreHarness

QUEUES = {"tq": True, "nq": False}


@dataclass
class ModelMessage:
    lookup_id: int
    body: bytes
    priority: int


@dataclass
class ModelQueue:
    transactional: bool
    messages: list[ModelMessage] = field(default_factory=list)
    next_lookup_id: int = 1
    held: set[int] = field(default_factory=set)

    def visible(self) -> list[ModelMessage]:
        return [m for m in self.messages if m.lookup_id not in self.held]

    def next_for_receive(self) -> ModelMessage | None:
        visible = self.visible()
        if not visible:
            return None
        if self.transactional:
            return visible[0]
        return min(visible, key=lambda m: (-m.priority, m.lookup_id))

    def append(self, body: bytes, priority: int) -> None:
        self.messages.append(
            ModelMessage(self.next_lookup_id, body, 0 if self.transactional else priority)
        )
        self.next_lookup_id += 1

    def remove(self, lookup_id: int) -> None:
        self.held.discard(lookup_id)
        self.messages = [m for m in self.messages if m.lookup_id != lookup_id]


@dataclass
class ModelTx:
    tx: Transaction
    sends: list[tuple[str, bytes]] = field(default_factory=list)
    receives: list[tuple[str, int]] = field(default_factory=list)


bodies = st.binary(min_size=0, max_size=40)
priorities = st.integers(0, 7)
queue_names = st.sampled_from(sorted(QUEUES))
picks = st.integers(0, 7)
MAX_OPEN = 4


def has_open(machine: QueueSemantics) -> bool:
    return bool(machine.open)


class QueueSemantics(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="qmgr-stateful-"))
        self.qm = CoreHarness(self.directory / "store")
        self.model = {name: ModelQueue(tx) for name, tx in QUEUES.items()}
        for name, transactional in QUEUES.items():
            self.qm.create(name, transactional=transactional)
        self.open: dict[int, ModelTx] = {}
        self.serial = 0

    def teardown(self) -> None:
        self.qm.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- sends ---------------------------------------------------------

    @rule(queue=queue_names, body=bodies, priority=priorities)
    def send_outside_transaction(self, queue: str, body: bytes, priority: int) -> None:
        self.qm.send(queue, body, priority=priority)
        self.model[queue].append(body, priority)

    @rule(queue=queue_names, body=bodies)
    def explicit_non_transactional_send(self, queue: str, body: bytes) -> None:
        if QUEUES[queue]:
            with pytest.raises(TransactionUsageError):
                self.qm.prepare(queue, body, mode=SendMode.NONE)
            return
        prepared = self.qm.prepare(queue, body, mode=SendMode.NONE)
        assert prepared is not None
        assert prepared.unit is not None
        self.qm.core.send_done(prepared, self.qm.write(prepared.unit))
        self.model[queue].append(body, 3)

    def pick(self, index: int) -> ModelTx:
        entries = sorted(self.open.values(), key=lambda e: e.tx.tx_id)
        return entries[index % len(entries)]

    @precondition(lambda self: len(self.open) < MAX_OPEN)
    @rule()
    def begin(self) -> None:
        tx = self.qm.begin()
        self.open[tx.tx_id] = ModelTx(tx)

    @precondition(has_open)
    @rule(index=picks, queue=queue_names, body=bodies)
    def send_in_transaction(self, index: int, queue: str, body: bytes) -> None:
        entry = self.pick(index)
        if not QUEUES[queue]:
            with pytest.raises(TransactionUsageError):
                self.qm.prepare(queue, body, tx=entry.tx)
            return
        self.qm.prepare(queue, body, tx=entry.tx)
        entry.sends.append((queue, body))

    # -- receives ------------------------------------------------------

    @rule(queue=queue_names)
    def receive_outside_transaction(self, queue: str) -> None:
        found = self.qm.take(queue)
        expected = self.model[queue].next_for_receive()
        if expected is None:
            assert found is None
            return
        assert found == (expected.lookup_id, expected.body)
        self.model[queue].remove(expected.lookup_id)

    @precondition(has_open)
    @rule(index=picks, queue=queue_names)
    def receive_in_transaction(self, index: int, queue: str) -> None:
        entry = self.pick(index)
        if not QUEUES[queue]:
            with pytest.raises(TransactionUsageError):
                self.qm.take(queue, entry.tx)
            return
        found = self.qm.take(queue, entry.tx)
        expected = self.model[queue].next_for_receive()
        if expected is None:
            assert found is None
            return
        assert found == (expected.lookup_id, expected.body)
        self.model[queue].held.add(expected.lookup_id)
        entry.receives.append((queue, expected.lookup_id))

    # -- endings -------------------------------------------------------

    @precondition(has_open)
    @rule(index=picks)
    def commit(self, index: int) -> None:
        self._commit_together([self.pick(index).tx.tx_id])

    @precondition(lambda self: len(self.open) >= 2)
    @rule(first=picks, offset=st.integers(1, 3))
    def commit_two_in_one_batch(self, first: int, offset: int) -> None:
        a, b = self.pick(first), self.pick(first + offset)
        self._commit_together([a.tx.tx_id, b.tx.tx_id] if a is not b else [a.tx.tx_id])

    @precondition(has_open)
    @rule(index=picks)
    def abort(self, index: int) -> None:
        entry = self.open.pop(self.pick(index).tx.tx_id)
        self.qm.core.abort(entry.tx)
        for queue, lookup_id in entry.receives:
            self.model[queue].held.discard(lookup_id)

    def _commit_together(self, tx_ids: list[int]) -> None:
        entries = [self.open.pop(tx_id) for tx_id in tx_ids if tx_id in self.open]
        if not entries:
            return
        errors = self.qm.commit(*(entry.tx for entry in entries))
        assert errors == [None] * len(entries)
        for entry in entries:
            for queue, lookup_id in entry.receives:
                self.model[queue].remove(lookup_id)
            for queue, body in entry.sends:
                self.model[queue].append(body, 0)

    @rule(queue=queue_names)
    def purge(self, queue: str) -> None:
        model = self.model[queue]
        # What transactions hold is not counted: it stays theirs.
        free = [m for m in model.messages if m.lookup_id not in model.held]
        assert self.qm.purge(queue) == len(free)
        # Everything goes at once, held messages included: they leave when
        # their transaction ends, whether it commits or aborts.
        model.messages = []
        model.next_lookup_id = self.qm.core.queue(queue).next_lookup_id

    @rule()
    def erase_step(self) -> None:
        self.qm.erase_all(step=3)

    @rule()
    def crash_and_restart(self) -> None:
        """Lose everything in memory, as ``kill -9`` would; reopen the store."""
        self.qm.crash()
        for entry in self.open.values():
            for queue, lookup_id in entry.receives:
                self.model[queue].held.discard(lookup_id)
        self.open.clear()

    # -- what readers see ----------------------------------------------

    @invariant()
    def readers_see_the_model(self) -> None:
        for name, model in self.model.items():
            expected = [(m.lookup_id, m.body) for m in model.visible()]
            assert self.qm.visible(name) == expected, name
            record = self.qm.core.queue(name)
            assert record.depth == len(model.messages)
            assert record.bytes == sum(len(m.body) for m in model.messages)
            assert record.next_lookup_id == model.next_lookup_id

    @invariant()
    def the_next_receive_would_take_the_model_next(self) -> None:
        for name, model in self.model.items():
            found = self.qm.core.peek(self.qm.core.queue(name))
            expected = model.next_for_receive()
            assert (found and found[0]) == (expected and expected.lookup_id), name


QueueSemantics.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestQueueSemantics = QueueSemantics.TestCase
