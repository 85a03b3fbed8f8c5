"""A model-based test: random appends, removals, purges, erase steps,
deletions and reopenings against a plain in-memory model of two queues.

After every step the store's visible messages, counters, delivery order and
the queues left to erase must agree with the model; at every reopening the
keys in the file must be exactly the messages the model says remain there
(visible, purged but not yet erased, or in a deleted queue), so nothing is
lost and nothing is left behind.
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from store_kit import append, create_queue, payloads, remove, stored_keys, unit

from storage import (
    SKIPPED,
    Appended,
    CreateQueue,
    DeleteQueue,
    Erased,
    EraseStep,
    Failed,
    MessageMissing,
    Operation,
    PurgeQueue,
    QueueCreated,
    QueueDeleted,
    QueuePurged,
    Removed,
    Store,
)

NAMES = ("fifo", "prio")
#: A lookup id no message has: removing it fails its operation.
MISSING = 10**9


@dataclass
class ModelQueue:
    queue_id: int
    journal_id: int
    transactional: bool
    #: Visible messages: lookup id -> (priority, payload).
    visible: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    #: Purged messages still in the file.
    purged: set[int] = field(default_factory=set)
    next_lookup_id: int = 1
    erasing: bool = False


class StoreAgainstModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._directory = tempfile.TemporaryDirectory()
        self.path = Path(self._directory.name) / "qm"
        self.store = Store(self.path, durable=False)
        self.queues = {name: self._create(name) for name in NAMES}
        #: Deleted queue id -> lookup ids of its messages still in the file.
        self.doomed: dict[int, set[int]] = {}
        self._payloads = itertools.count()

    def teardown(self) -> None:
        self.store.close()
        self._directory.cleanup()

    def _create(self, name: str) -> ModelQueue:
        record = create_queue(self.store, name, transactional=name == "fifo")
        assert record.journal_id is not None
        return ModelQueue(record.queue_id, record.journal_id, record.transactional)

    def _payload(self, length: int) -> bytes:
        return f"{next(self._payloads)}:".encode().ljust(length, b"p")

    # ------------------------------------------------------------------ rules

    @rule(
        name=st.sampled_from(NAMES),
        messages=st.lists(st.tuples(st.integers(0, 7), st.integers(1, 40)), min_size=1, max_size=4),
        failing_at=st.none() | st.integers(0, 4),
        atomic=st.booleans(),
    )
    def append_unit(
        self,
        name: str,
        messages: list[tuple[int, int]],
        failing_at: int | None,
        atomic: bool,
    ) -> None:
        queue = self.queues[name]
        sent = [(priority, self._payload(length)) for priority, length in messages]
        ops: list[Operation] = [
            append(queue.queue_id, body, priority=priority) for priority, body in sent
        ]
        if failing_at is not None:
            ops.insert(min(failing_at, len(ops)), remove(queue.queue_id, MISSING))
        [outcome] = self.store.commit([unit(*ops, atomic=atomic)], now=1.0)
        if failing_at is not None and atomic:
            failed = min(failing_at, len(sent))
            for index, result in enumerate(outcome.results):
                assert (result is SKIPPED) == (index != failed)
            assert isinstance(outcome.error, MessageMissing)
            return
        results = [r for r in outcome.results if not isinstance(r, Failed)]
        expected = range(queue.next_lookup_id, queue.next_lookup_id + len(sent))
        assert results == [Appended(queue.queue_id, lookup_id) for lookup_id in expected]
        for lookup_id, message in zip(expected, sent, strict=True):
            queue.visible[lookup_id] = message
        queue.next_lookup_id += len(sent)

    @rule(name=st.sampled_from(NAMES), data=st.data())
    def remove_unit(self, name: str, data: st.DataObject) -> None:
        queue = self.queues[name]
        held = sorted(queue.visible) + sorted(queue.purged)
        if not held:
            return
        chosen = data.draw(st.lists(st.sampled_from(held), min_size=1, max_size=3, unique=True))
        [outcome] = self.store.commit(
            [unit(*(remove(queue.queue_id, lookup_id) for lookup_id in chosen))], now=2.0
        )
        assert outcome.results == tuple(Removed(queue.queue_id, lookup_id) for lookup_id in chosen)
        for lookup_id in chosen:
            queue.visible.pop(lookup_id, None)
            queue.purged.discard(lookup_id)

    @rule(name=st.sampled_from(NAMES))
    def purge(self, name: str) -> None:
        queue = self.queues[name]
        [outcome] = self.store.commit([unit(PurgeQueue(queue.queue_id))], now=3.0)
        assert outcome.results == (QueuePurged(queue.queue_id, len(queue.visible)),)
        queue.erasing = queue.erasing or bool(queue.visible)
        queue.purged |= set(queue.visible)
        queue.visible.clear()

    @rule(name=st.sampled_from(NAMES), limit=st.integers(1, 4), data=st.data())
    def erase_step(self, name: str, limit: int, data: st.DataObject) -> None:
        queue = self.queues[name]
        keep = data.draw(st.sets(st.sampled_from(sorted(queue.purged)))) if queue.purged else set()
        [outcome] = self.store.commit(
            [unit(EraseStep(queue.queue_id, limit, frozenset(keep)))], now=4.0
        )
        if not queue.erasing:
            assert outcome.results == (Erased(queue.queue_id, 0, True),)
            return
        erased = sorted(queue.purged - keep)[:limit]
        queue.purged -= set(erased)
        done = not queue.purged
        assert outcome.results == (Erased(queue.queue_id, len(erased), done),)
        queue.erasing = not done

    @rule(name=st.sampled_from(NAMES), length=st.integers(1, 40))
    def append_purge_and_erase_in_one_batch(self, name: str, length: int) -> None:
        queue = self.queues[name]
        body = self._payload(length)
        before = set(queue.purged)
        outcomes = self.store.commit(
            [
                unit(append(queue.queue_id, body)),
                unit(PurgeQueue(queue.queue_id)),
                unit(EraseStep(queue.queue_id, 1000)),
            ],
            now=5.0,
        )
        lookup_id = queue.next_lookup_id
        assert outcomes[0].results == (Appended(queue.queue_id, lookup_id),)
        assert outcomes[1].results == (QueuePurged(queue.queue_id, len(queue.visible) + 1),)
        # The erase step sees only what was committed before the batch.
        erased = len(before) + len(queue.visible)
        assert outcomes[2].results == (Erased(queue.queue_id, erased, False),)
        queue.next_lookup_id += 1
        queue.purged = {lookup_id}
        queue.visible.clear()
        queue.erasing = True

    @rule(name=st.sampled_from(NAMES))
    def delete_and_recreate(self, name: str) -> None:
        old = self.queues[name]
        [deleted, created] = self.store.commit(
            [
                unit(DeleteQueue(old.queue_id)),
                unit(CreateQueue(name, name, transactional=old.transactional)),
            ],
            now=6.0,
        )
        assert deleted.results == (QueueDeleted((old.queue_id, old.journal_id), len(old.visible)),)
        self.doomed[old.queue_id] = set(old.visible) | old.purged
        self.doomed[old.journal_id] = set()
        [result] = created.results
        assert isinstance(result, QueueCreated)
        assert result.journal is not None
        assert result.record.queue_id > old.journal_id
        self.queues[name] = ModelQueue(
            result.record.queue_id, result.journal.queue_id, old.transactional
        )

    @precondition(lambda self: bool(self.doomed))
    @rule(data=st.data(), limit=st.integers(1, 4))
    def erase_deleted_queue(self, data: st.DataObject, limit: int) -> None:
        queue_id = data.draw(st.sampled_from(sorted(self.doomed)))
        left = self.doomed[queue_id]
        [outcome] = self.store.commit([unit(EraseStep(queue_id, limit))], now=7.0)
        erased = sorted(left)[:limit]
        left -= set(erased)
        assert outcome.results == (Erased(queue_id, len(erased), not left),)
        if not left:
            del self.doomed[queue_id]

    @rule()
    def reopen(self) -> None:
        self.store.close()
        for queue in self.queues.values():
            in_file = sorted(set(queue.visible) | queue.purged)
            indexed = [] if queue.transactional else in_file
            assert stored_keys(self.path, queue.queue_id) == (in_file, indexed)
        for queue_id, left in self.doomed.items():
            assert stored_keys(self.path, queue_id)[0] == sorted(left)
        self.store = Store(self.path, durable=False)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def visible_messages_and_counters_agree(self) -> None:
        for name, queue in self.queues.items():
            record = self.store.get_queue(name)
            assert record is not None
            assert record.queue_id == queue.queue_id
            size = sum(len(body) for _, body in queue.visible.values())
            assert (record.next_lookup_id, record.depth, record.bytes) == (
                queue.next_lookup_id,
                len(queue.visible),
                size,
            )
            assert record.erasing == queue.erasing
            found = self.store.read_range(queue.queue_id, limit=10_000)
            assert [lookup_id for lookup_id, _ in found] == sorted(queue.visible)
            assert payloads(self.store, queue.queue_id) == [
                queue.visible[lookup_id][1] for lookup_id in sorted(queue.visible)
            ]
            for lookup_id in queue.purged:
                assert self.store.read_message(queue.queue_id, lookup_id) is None

    @invariant()
    def delivery_order_agrees(self) -> None:
        fifo = self.queues["fifo"]
        found = self.store.first_fifo(fifo.queue_id, start=1, skip=())
        assert (found and found[0]) == (min(fifo.visible) if fifo.visible else None)
        prio = self.queues["prio"]
        best = self.store.first_by_priority(prio.queue_id, start=(0, 0), skip=())
        expected = min(prio.visible, key=lambda n: (-prio.visible[n][0], n), default=None)
        assert (best and best[1]) == expected

    @invariant()
    def queues_to_erase_agree(self) -> None:
        erasing = sorted(q.queue_id for q in self.queues.values() if q.erasing)
        assert self.store.queues_to_erase() == sorted(self.doomed) + erasing


TestStoreAgreesWithAModel = StoreAgainstModel.TestCase
TestStoreAgreesWithAModel.settings = settings(max_examples=60, stateful_step_count=30)
