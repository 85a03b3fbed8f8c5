"""The core over a real store, with its units written as the daemon writes them.

The core only *decides*: it reads the store and returns units. To hold it to
that, it gets a :class:`ReadOnlyStore`, a view of the real store without any
write method; the harness writes every unit the core returns and hands the
outcome back, like the daemon's committer. ``crash()`` closes the store and
starts a fresh core over it, as after ``kill -9``: everything in memory is
lost.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Final

from qmgr.core.engine import Limits, PreparedSend, QueueManagerCore
from qmgr.core.errors import QueueManagerError
from qmgr.core.sends import SendMode
from qmgr.core.transactions import Transaction
from storage import Store, Unit, UnitOutcome, message_payload
from wire import MessageProperties

WALL: Final = 1_700_000_000.0

#: MQMSG_ACKNOWLEDGMENT_* bits: positive and negative, at arrival and at receipt.
POS_ARRIVAL, POS_RECEIVE, NEG_ARRIVAL, NEG_RECEIVE = 0x01, 0x02, 0x04, 0x08
#: Every acknowledgment.
FULL: Final = 0x0F
#: MQMSG_DEADLETTER and MQMSG_JOURNAL.
DEADLETTER, JOURNAL = 0x01, 0x02
#: Another queue manager: the source of the messages that arrive here.
SOURCE: Final = uuid.UUID("6f9619ff-8b86-d011-b42d-00c04fc964ff")

#: What the core may use of a store: reading only.
READS: Final = frozenset(
    {
        "get_queue",
        "get_queue_by_id",
        "list_queues",
        "read_message",
        "read_range",
        "first_fifo",
        "first_by_priority",
        "qm_guid",
        "ordinal_limit",
        "queues_to_erase",
        "get_setting",
        "prepared_transactions",
        "outcome",
        "outcomes",
        "range_end",
        "read_through",
        "message_counters",
        "retries_due",
        "erasable",
        "doomed_queue",
        "due_messages",
        "prepared",
        "confirmation",
        "confirmations",
        "final_acks",
        "final_ack_count",
        "get_list",
        "lists",
        "scan_messages",
    }
)


class ReadOnlyStore:
    """A store view without writes: the core decides, the writer writes."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name not in READS:
            msg = f"the core must not use Store.{name}: it decides, the writer writes"
            raise AttributeError(msg)
        return getattr(self._store, name)


class CoreHarness:
    """A core, its store, and the daemon's part: writing units, keeping time."""

    def __init__(self, path: Path, *, limits: Limits | None = None) -> None:
        self.path = path
        self.limits = limits
        self.now = 1000.0
        self.store: Store
        self.core: QueueManagerCore
        self._open()

    def _open(self) -> None:
        self.store = Store(self.path, initial_map_size=1 << 22, durable=False)
        self.core = QueueManagerCore(ReadOnlyStore(self.store), limits=self.limits)  # type: ignore[arg-type]
        for unit in self.core.queues.system_queue_units(WALL):
            self.write(unit)
        self.reserve_ordinals()

    def reserve_ordinals(self) -> None:
        unit = self.core.ordinal_reservation()
        if unit is not None:
            self.core.ordinals_reserved(unit, self.write(unit))

    def close(self) -> None:
        self.store.close()

    def crash(self) -> None:
        """Forget everything in memory and start again on the same store."""
        self.store.close()
        self._open()

    def tick(self) -> float:
        self.now += 1.0
        return self.now

    def write(self, unit: Unit) -> UnitOutcome:
        [outcome] = self.store.commit([unit], now=WALL)
        return outcome

    # ------------------------------------------------------------------ queues

    def create(self, name: str, **options: Any) -> None:
        self.core.queues.created(self.write(self.core.queues.create(name, wall=WALL, **options)))

    def purge(self, name: str) -> int:
        _, unit = self.core.queues.purge(name)
        return self.core.queues.purged(self.write(unit))

    def erase_all(self, step: int = 2) -> None:
        """Run erase steps until nothing is left to erase but held messages."""
        for queue_id in self.store.queues_to_erase():
            while True:
                outcome = self.write(self.core.queues.erase_unit(queue_id, step))
                result = outcome.results[0]
                if getattr(result, "done", True) or getattr(result, "messages", 0) == 0:
                    break

    # ------------------------------------------------------------------ sends

    def message_id(self, queue: str, body: bytes = b"") -> str:
        """The id a send outside a transaction gets (the send is not written)."""
        prepared = self.prepare(queue, body)
        assert prepared is not None
        return prepared.message_id

    def message(self, queue: str, body: bytes = b"", **properties: Any) -> MessageProperties:
        return MessageProperties(body=body, destination=queue, **properties)

    def prepare(
        self,
        queue: str,
        body: bytes = b"",
        *,
        tx: Transaction | None = None,
        mode: SendMode = SendMode.AUTO,
        **properties: Any,
    ) -> PreparedSend | None:
        """Prepare a send; None inside a transaction (the send is kept in it)."""
        return self.core.prepare_send(
            self.message(queue, body, **properties), tx=tx, mode=mode, now=self.tick(), wall=WALL
        )

    def send(self, queue: str, body: bytes = b"", **properties: Any) -> int:
        """Send outside a transaction; returns the lookup id."""
        prepared = self.prepare(queue, body, **properties)
        assert prepared is not None
        assert prepared.unit is not None
        return self.core.send_done(prepared, self.write(prepared.unit))

    def begin(self) -> Transaction:
        return self.core.begin(self, client_id=0, now=self.tick())

    def send_tx(self, destination: str, body: bytes = b"x", **properties: Any) -> None:
        """Send in a transaction of its own, committed."""
        tx = self.begin()
        assert self.prepare(destination, body, tx=tx, **properties) is None
        assert self.commit(tx) == [None]

    def commit(self, *txs: Transaction) -> list[QueueManagerError | None]:
        """Commit several transactions in one batch; the error of each (or None)."""
        units = [self.core.commit(tx) for tx in txs]
        outcomes = self.store.commit(units, now=WALL)
        return [
            self.core.commit_done(tx, unit, outcome)[1]
            for tx, unit, outcome in zip(txs, units, outcomes, strict=True)
        ]

    # ------------------------------------------------------------------ receives

    def take(self, queue: str, tx: Transaction | None = None) -> tuple[int, bytes] | None:
        """Receive the next message (in ``tx``, or removed at once): ``(lookup_id, body)``."""
        record = self.core.queue(queue)
        self.core.check_receive(record, tx, peek=False)
        found = self.core.take(record, tx=tx, now=self.tick())
        if found is None:
            return None
        lookup_id, stored = found
        if tx is None:
            outcome = self.write(self.core.removal(record, lookup_id, stored, wall=WALL))
            _, error = self.core.removal_done(record.queue_id, lookup_id, outcome)
            assert error is None
        return lookup_id, MessageProperties.from_bytes(message_payload(stored)).body

    def visible(self, queue: str) -> list[tuple[int, bytes]]:
        """What a bulk reader sees: ``(lookup_id, body)`` in lookup id order."""
        record = self.core.queue(queue)
        return [
            (lookup_id, MessageProperties.from_bytes(message_payload(stored)).body)
            for lookup_id, stored in self.core.ranges.peek_range(record, after=0, limit=100_000)
        ]

    def bodies(self, queue: str) -> list[bytes]:
        """The bodies a bulk reader sees in ``queue``, in lookup id order."""
        return [body for _, body in self.visible(queue)]


def messages(qm: CoreHarness, queue: str) -> list[MessageProperties]:
    """The messages stored in ``queue``, in lookup id order."""
    record = qm.core.queue(queue)
    return [
        MessageProperties.from_bytes(message_payload(stored))
        for _, stored in qm.store.read_range(record.queue_id, limit=10_000)
    ]


def classes(qm: CoreHarness, queue: str) -> list[int]:
    """The message classes of the messages in ``queue``."""
    return [message.message_class for message in messages(qm, queue)]


def expire(qm: CoreHarness, wall: float) -> int:
    """Run expiry steps at ``wall`` until nothing more is due; how many units applied."""
    expiry = qm.core.expiry
    count = 0
    while True:
        step = expiry.step(wall, 2)
        for message, unit in zip(step.messages, step.units, strict=True):
            outcome = qm.write(unit)
            expiry.done(message, outcome)
            count += outcome.error is None
        if not step.more:
            return count


def abort_receive(qm: CoreHarness, queue: str) -> int | None:
    """Receive the next message of ``queue`` in a transaction and abort it; its lookup id."""
    tx = qm.begin()
    found = qm.take(queue, tx)
    qm.core.abort(tx)
    return None if found is None else found[0]


def flush_poison(qm: CoreHarness, now: float = WALL) -> None:
    """Write what aborts queued for poison handling, as the daemon's worker does (at ``now``)."""
    while (unit := qm.core.poison.take_unit()) is not None:
        [outcome] = qm.store.commit([unit], now=now)
        qm.core.poison.written(unit, outcome)
