"""The scratch state of a batch while it is planned: queue states and savepoints.

Theory of operation
-------------------
While ``_plan`` plans a batch, every change an operation makes is held
here, over the committed catalog, until the batch ends: a
:class:`QueueState` per queue the batch looked at (copied on its first
change under a savepoint), and plain dictionaries of the
:class:`~storage._plan.PlanContext` for names, deletions, removed
messages, meta counters and the peering records. A :class:`Savepoint`
notes the value of each ``(mapping, key)`` before its first change and the
length of the write list when it began, so rolling it back restores both
exactly; a savepoint that ends without a rollback hands what it noted to
the one around it, so an enclosing rollback still undoes everything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ._records import QueueRecord

if TYPE_CHECKING:
    from ._plan import PlanContext

__all__ = ["MISSING", "QueueState", "Savepoint"]

#: A key absent from a mapping (``None`` is a value there: "deleted").
MISSING: Final = object()


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

    __slots__ = ("_context", "_undo", "_writes", "rolled_back")

    def __init__(self, context: PlanContext) -> None:
        self._context = context
        self._writes = len(context.writes)
        # (mapping, key) -> value before the first change under this savepoint
        self._undo: dict[tuple[int, object], tuple[dict[object, object], object, object]] = {}
        self.rolled_back = False

    def remember(self, mapping: dict[object, object], key: object) -> bool:
        """Note ``mapping[key]`` before its first change; False if already noted."""
        token = (id(mapping), key)
        if token in self._undo:
            return False
        self._undo[token] = (mapping, key, mapping.get(key, MISSING))
        return True

    def roll_back(self) -> None:
        """Undo every write and change made since the savepoint began."""
        context = self._context
        del context.writes[self._writes :]
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
        self._context._stack.append(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        stack = self._context._stack
        stack.pop()
        if exc_type is not None:
            self.roll_back()
        elif not self.rolled_back:
            self.merge_into(stack[-1])
