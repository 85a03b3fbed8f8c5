"""Queue and transaction semantics, checked against a simple in-memory model.

Hypothesis drives the real core over a real (temporary) LMDB store with
random sequences of sends, receives, transactions, commits (alone or several
in one group-commit batch), aborts, purges and crashes (the store is closed
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

from qmgr.core.engine import MessageProperties, QueueManagerCore, SendMode, Transaction
from qmgr.core.errors import TransactionUsageError
from storage import Store

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
    locked: set[int] = field(default_factory=set)

    def visible(self) -> list[ModelMessage]:
        return [m for m in self.messages if m.lookup_id not in self.locked]

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


@dataclass
class ModelTx:
    tx: Transaction
    sends: list[tuple[str, bytes, int]] = field(default_factory=list)
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
        self.store = Store(self.directory / "store", initial_map_size=1 << 20)
        self.core = QueueManagerCore(self.store)
        self.now = 1_000_000.0
        self.model = {name: ModelQueue(tx) for name, tx in QUEUES.items()}
        for name, transactional in QUEUES.items():
            self.core.create_queue(name, transactional=transactional, now=self.now)
        self.open: dict[int, ModelTx] = {}

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def tick(self) -> float:
        self.now += 1.0
        return self.now

    # -- sends ---------------------------------------------------------

    @rule(queue=queue_names, body=bodies, priority=priorities)
    def send_outside_transaction(self, queue: str, body: bytes, priority: int) -> None:
        prepared = self.core.prepare_send(
            queue, MessageProperties(body=body, priority=priority), tx=None, now=self.tick()
        )
        assert prepared.transactional == QUEUES[queue]
        [outcome] = self.store.commit_batch([_unit(prepared.messages)], now=self.now)
        assert outcome.error is None
        self.model[queue].append(body, priority)

    @rule(queue=queue_names, body=bodies)
    def explicit_non_transactional_send(self, queue: str, body: bytes) -> None:
        properties = MessageProperties(body=body)
        if QUEUES[queue]:
            with pytest.raises(TransactionUsageError):
                self.core.prepare_send(
                    queue, properties, tx=None, mode=SendMode.NONE, now=self.tick()
                )
            return
        prepared = self.core.prepare_send(
            queue, properties, tx=None, mode=SendMode.NONE, now=self.tick()
        )
        [outcome] = self.store.commit_batch([_unit(prepared.messages)], now=self.now)
        assert outcome.error is None
        self.model[queue].append(body, 3)

    def pick(self, index: int) -> ModelTx:
        entries = sorted(self.open.values(), key=lambda e: e.tx.tx_id)
        return entries[index % len(entries)]

    @precondition(lambda self: len(self.open) < MAX_OPEN)
    @rule()
    def begin(self) -> None:
        tx = self.core.begin(owner=self, now=self.tick())
        self.open[tx.tx_id] = ModelTx(tx)

    @precondition(has_open)
    @rule(index=picks, queue=queue_names, body=bodies)
    def send_in_transaction(self, index: int, queue: str, body: bytes) -> None:
        entry = self.pick(index)
        properties = MessageProperties(body=body)
        if not QUEUES[queue]:
            with pytest.raises(TransactionUsageError):
                self.core.prepare_send(queue, properties, tx=entry.tx, now=self.tick())
            return
        self.core.prepare_send(queue, properties, tx=entry.tx, now=self.tick())
        entry.sends.append((queue, body, 0))

    # -- receives ------------------------------------------------------

    @rule(queue=queue_names)
    def receive_outside_transaction(self, queue: str) -> None:
        record = self.core.queue(queue)
        self.core.check_receive(record, None, peek=False)
        found = self.core.find(record)
        expected = self.model[queue].next_for_receive()
        if expected is None:
            assert found is None
            return
        assert found is not None
        lookup_id, message = found
        assert (lookup_id, message.body) == (expected.lookup_id, expected.body)
        self.core.lock(record, lookup_id, None, self.tick())
        [outcome] = self.store.commit_batch(
            [self.core.removal_unit(record, lookup_id)], now=self.now
        )
        _, error = self.core.finish_removal(record.queue_id, lookup_id, outcome)
        assert error is None
        self.model[queue].messages.remove(expected)

    @precondition(has_open)
    @rule(index=picks, queue=queue_names)
    def receive_in_transaction(self, index: int, queue: str) -> None:
        entry = self.pick(index)
        record = self.core.queue(queue)
        if not QUEUES[queue]:
            with pytest.raises(TransactionUsageError):
                self.core.check_receive(record, entry.tx, peek=False)
            return
        found = self.core.find(record)
        expected = self.model[queue].next_for_receive()
        if expected is None:
            assert found is None
            return
        assert found is not None
        assert found[0] == expected.lookup_id
        self.core.lock(record, found[0], entry.tx, self.tick())
        self.model[queue].locked.add(found[0])
        entry.receives.append((queue, found[0]))

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
        self.core.abort(entry.tx)
        pending = getattr(self, "purge_pending", set())
        for queue, lookup_id in entry.receives:
            model = self.model[queue]
            model.locked.discard(lookup_id)
            if (queue, lookup_id) in pending:
                # Purged while locked: it leaves the queue when its transaction ends.
                pending.discard((queue, lookup_id))
                model.messages = [m for m in model.messages if m.lookup_id != lookup_id]

    def _commit_together(self, tx_ids: list[int]) -> None:
        entries = [self.open.pop(tx_id) for tx_id in tx_ids if tx_id in self.open]
        if not entries:
            return
        units = [self.core.prepare_commit(entry.tx) for entry in entries]
        outcomes = self.store.commit_batch(units, now=self.tick())
        for entry, outcome in zip(entries, outcomes, strict=True):
            _, error = self.core.finish_commit(entry.tx, outcome)
            assert error is None
            for queue, lookup_id in entry.receives:
                model = self.model[queue]
                model.locked.discard(lookup_id)
                model.messages = [m for m in model.messages if m.lookup_id != lookup_id]
                getattr(self, "purge_pending", set()).discard((queue, lookup_id))
            first_ids: dict[str, list[int]] = {}
            for send in outcome.sends:
                first_ids.setdefault(
                    self.core.store.get_queue_by_id(send.queue_id).name, []
                ).append(  # type: ignore[union-attr]
                    send.lookup_id
                )
            for queue, body, priority in entry.sends:
                self.model[queue].append(body, priority)
            # A transaction's sends to one queue get consecutive LookupIds.
            for ids in first_ids.values():
                assert ids == list(range(ids[0], ids[0] + len(ids)))

    @rule(queue=queue_names)
    def purge(self, queue: str) -> None:
        self.core.purge_queue(queue)
        model = self.model[queue]
        model.messages = [m for m in model.messages if m.lookup_id in model.locked]
        self.purge_pending = getattr(self, "purge_pending", set())
        self.purge_pending |= {(queue, lookup_id) for lookup_id in model.locked}

    @rule()
    def crash_and_restart(self) -> None:
        """Lose everything in memory, as ``kill -9`` would; reopen the store."""
        self.store.close()
        self.store = Store(self.directory / "store", initial_map_size=1 << 20)
        self.core = QueueManagerCore(self.store)
        pending = getattr(self, "purge_pending", set())
        for entry in self.open.values():
            for queue, lookup_id in entry.receives:
                self.model[queue].locked.discard(lookup_id)
        # Messages a purge marked while locked stay until their transaction ends;
        # a crash ends it by abort, and the restarted daemon no longer remembers the
        # purge: they are visible again, which is what MSMQ does too.
        pending.clear()
        self.open.clear()

    # -- what readers see ----------------------------------------------

    @invariant()
    def readers_see_the_model(self) -> None:
        for name, model in self.model.items():
            record = self.core.queue(name)
            seen = [(lid, m.body) for lid, m in self.core.peek_range(record, after=0, limit=10_000)]
            expected = [(m.lookup_id, m.body) for m in model.visible()]
            assert seen == expected, name
            assert record.depth == len(model.messages)
            assert record.next_lookup_id == model.next_lookup_id

    @invariant()
    def the_next_receive_takes_the_model_next(self) -> None:
        for name, model in self.model.items():
            found = self.core.find(self.core.queue(name))
            expected = model.next_for_receive()
            assert (found and found[0]) == (expected and expected.lookup_id), name


def _unit(messages: tuple[object, ...]) -> object:
    from storage import CommitUnit

    return CommitUnit(sends=messages)  # type: ignore[arg-type]


QueueSemantics.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestQueueSemantics = QueueSemantics.TestCase
