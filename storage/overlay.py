"""The undoable state of a batch being planned: its writes, savepoints and scratch state.

Theory of operation
-------------------
While a batch is planned nothing is written to LMDB and nothing in the
catalog changes: every change an operation makes is held in an
:class:`Overlay` (the base of :class:`~storage.context.PlanContext`) until the
batch ends.

* The *write list*: every write the batch will apply, in order: its kind
  (:data:`PUT`, :data:`PUT_NEW`, :data:`DELETE`, :data:`DISCARD`), the
  database, the key and the value. ``plan.apply_plan`` replays it in one
  write transaction.
* *Changes*: plain dictionaries laid over the committed state (queue
  states, names, meta counters, outgoing states, reservations), owned by
  the context and its parts and changed only through :meth:`Overlay.change`.
  A queue's record and counters are a :class:`QueueState`, copied on its
  first change under a savepoint and changed in place after that.
* *Scratch state*: what an operation module keeps for the rest of the batch
  under keys of its own (a message's counters, an xid's state, a list's
  record), so that a later operation of the batch sees it although nothing
  is written yet (:meth:`Overlay.scratch`, :meth:`Overlay.set_scratch`).

A :class:`Savepoint` notes the value of each ``(mapping, key)`` before its
first change and the length of the write list when it began, so rolling it
back restores both exactly; a savepoint that ends without a rollback hands
what it noted to the one around it, so an enclosing rollback still undoes
everything. The overlay keeps a stack of them whose bottom is never rolled
back.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import lmdb

from .records import QueueRecord

__all__ = [
    "DELETE",
    "DISCARD",
    "MISSING",
    "PUT",
    "PUT_NEW",
    "Changes",
    "Overlay",
    "QueueState",
    "Savepoint",
    "Write",
]

#: A key absent from a mapping (``None`` is a value there: "deleted").
MISSING: Final = object()

#: Kinds of write: put a key whether it is there or not, put a key that must be
#: new, delete a key that must be there, delete a key if it is there.
PUT: Final = 0
PUT_NEW: Final = 1
DELETE: Final = 2
DISCARD: Final = 3

#: One write: its kind, the database, the key and the value (``b""`` for a delete).
Write: TypeAlias = tuple[int, lmdb._Database, bytes, bytes]
#: A mapping of changes, laid over some committed state.
Changes: TypeAlias = dict[Any, Any]


class QueueState:
    """A queue's record and counters while a batch is planned (mutable scratch)."""

    __slots__ = ("bytes", "deleted", "depth", "erasing", "next_lookup_id", "purged_below", "record")

    def __init__(self, record: QueueRecord) -> None:
        self.record = record
        self.next_lookup_id = record.next_lookup_id
        self.depth = record.depth
        self.bytes = record.bytes
        self.purged_below = record.purged_below
        self.erasing = record.erasing
        self.deleted = False

    def copy(self) -> QueueState:
        """An independent copy (for copy-on-write under a savepoint)."""
        clone = QueueState.__new__(QueueState)
        clone.record = self.record
        clone.next_lookup_id = self.next_lookup_id
        clone.depth = self.depth
        clone.bytes = self.bytes
        clone.purged_below = self.purged_below
        clone.erasing = self.erasing
        clone.deleted = self.deleted
        return clone

    def final_record(self) -> QueueRecord:
        """The record as it will be stored."""
        record = self.record
        if (
            record.next_lookup_id == self.next_lookup_id
            and record.depth == self.depth
            and record.bytes == self.bytes
            and record.purged_below == self.purged_below
            and record.erasing == self.erasing
        ):
            return record
        return record.with_counters(
            next_lookup_id=self.next_lookup_id,
            depth=self.depth,
            size=self.bytes,
            purged_below=self.purged_below,
            erasing=self.erasing,
        )


class Savepoint:
    """What to restore if the operations since it began are rolled back."""

    __slots__ = ("_overlay", "_undo", "_writes", "rolled_back")

    def __init__(self, overlay: Overlay) -> None:
        self._overlay = overlay
        self._writes = len(overlay.writes)
        # (mapping, key) -> value before the first change under this savepoint
        self._undo: dict[tuple[int, object], tuple[Changes, object, object]] = {}
        self.rolled_back = False

    def remember(self, mapping: Changes, key: object) -> bool:
        """Note ``mapping[key]`` before its first change; False if already noted."""
        token = (id(mapping), key)
        if token in self._undo:
            return False
        self._undo[token] = (mapping, key, mapping.get(key, MISSING))
        return True

    def roll_back(self) -> None:
        """Undo every write and change made since the savepoint began."""
        del self._overlay.writes[self._writes :]
        for mapping, key, before in self._undo.values():
            if before is MISSING:
                mapping.pop(key, None)
            else:
                mapping[key] = before
        self._undo.clear()
        self.rolled_back = True

    def merge_into(self, parent: Savepoint) -> None:
        """Hand what this savepoint would undo to the enclosing one."""
        for token, entry in self._undo.items():
            parent._undo.setdefault(token, entry)

    def __enter__(self) -> Savepoint:
        self._overlay._stack.append(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        stack = self._overlay._stack
        stack.pop()
        if exc_type is not None:
            self.roll_back()
        elif not self.rolled_back:
            self.merge_into(stack[-1])


class Overlay:
    """A batch's write list, savepoints and scratch state (see the module docstring)."""

    def __init__(self) -> None:
        self.writes: list[Write] = []
        self._stack: list[Savepoint] = []
        self._stack.append(Savepoint(self))
        #: Other modules' state of the batch, by key.
        self._scratch: Changes = {}

    def savepoint(self) -> Savepoint:
        """A savepoint for a ``with`` block: changes made in it can be undone with
        ``roll_back()``; an exception from the block undoes them and propagates."""
        return Savepoint(self)

    def remember(self, mapping: Changes, key: object) -> bool:
        """Note ``mapping[key]`` in the current savepoint before a change made in
        place; False if it was noted already (see :meth:`Savepoint.remember`)."""
        return self._stack[-1].remember(mapping, key)

    def change(self, mapping: Changes, key: object, value: object) -> None:
        """Set ``mapping[key]`` so that the current savepoint can undo it."""
        self._stack[-1].remember(mapping, key)
        mapping[key] = value

    def scratch(self, key: object) -> object:
        """What :meth:`set_scratch` kept under ``key`` in this batch, or ``MISSING``."""
        return self._scratch.get(key, MISSING)

    def set_scratch(self, key: object, value: object) -> None:
        """Keep ``value`` under ``key`` until the batch ends (savepoints undo it)."""
        self.change(self._scratch, key, value)

    def put(self, db: lmdb._Database, key: bytes, value: bytes) -> None:
        """Write a key, whether it is there or not."""
        self.writes.append((PUT, db, key, value))

    def discard(self, db: lmdb._Database, key: bytes) -> None:
        """Delete a key if it is there."""
        self.writes.append((DISCARD, db, key, b""))

    def drop_write(self, db: lmdb._Database, key: bytes) -> None:
        """Take every write of ``key`` in ``db`` out of the write list."""
        self.writes[:] = [w for w in self.writes if not (w[1] is db and w[2] == key)]
