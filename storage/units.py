"""Operations, units of work, and what became of them.

Theory of operation
-------------------
Every change to the store is an :class:`Operation` inside a :class:`Unit`.
The writer takes units in batches (one LMDB write transaction and one sync
per batch); ``plan`` turns a batch into the exact keys and values to write
and gives every operation a :class:`Result`. An operation's
:meth:`~Operation.plan` checks what it needs first (the queue exists, the
quota holds, the message is there) and either raises one of
:data:`OPERATION_ERRORS` or records its writes through the
:class:`~storage.context.PlanContext` and returns its result.

* An *atomic* unit (a client transaction) applies all of its operations or
  none: the first failure rolls the unit back, and its outcome carries that
  operation's :class:`Failed` result and :data:`SKIPPED` for the others.
* A non-atomic unit applies each operation on its own; a failed one is
  rolled back alone.
* :class:`Attempt` tries one operation and, if it fails, another in its
  place, in the same unit: this is how a batch of arriving messages accepts
  some and sends others to a dead-letter queue without failing the batch.
  :class:`Together` makes one operation of several, all or none.

New kinds of operation are new subclasses, in the module of their concern
(``ops.queues``, ``ops.messages``, ``ops.peering``, ...); the planner and
the writer do not change. An operation that only frees space (a
:class:`Removal`) may use the headroom a full store keeps, so removing data
always works on a full store.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Final

from .context import PlanContext
from .errors import (
    ConfirmationMissing,
    IncomingStreamMoved,
    InvalidOperation,
    InvalidRecord,
    ListExists,
    ListMissing,
    MessageMissing,
    QueueExists,
    QueueMissing,
    QuotaExceeded,
    StoreError,
    XidInUse,
    XidResolved,
    XidUnknown,
)

__all__ = [
    "OPERATION_ERRORS",
    "SKIPPED",
    "Attempt",
    "Done",
    "Failed",
    "Fallback",
    "Operation",
    "Removal",
    "Result",
    "Skipped",
    "Together",
    "Unit",
    "UnitOutcome",
]

#: Errors that fail one operation (and its unit, if atomic), not the batch.
OPERATION_ERRORS: Final = (
    ConfirmationMissing,
    IncomingStreamMoved,
    ListExists,
    ListMissing,
    QueueMissing,
    QueueExists,
    QuotaExceeded,
    MessageMissing,
    InvalidRecord,
    InvalidOperation,
    XidInUse,
    XidResolved,
    XidUnknown,
)


# --------------------------------------------------------------------------- results


class Result:
    """What became of one operation."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Done(Result):
    """An operation that has nothing to report succeeded."""


@dataclass(frozen=True, slots=True)
class Failed(Result):
    """The operation failed; nothing of it was applied."""

    error: StoreError


@dataclass(frozen=True, slots=True)
class Skipped(Result):
    """Not applied: another operation of its atomic unit failed."""


#: The result of every operation of a failed atomic unit but the failing one.
SKIPPED: Final = Skipped()


@dataclass(frozen=True, slots=True)
class Fallback(Result):
    """An :class:`Attempt`'s first operation failed with ``error``; the second gave ``result``."""

    error: StoreError
    result: Result


# --------------------------------------------------------------------------- operations


class Operation(abc.ABC):
    """One change to the store, planned by :meth:`plan`."""

    __slots__ = ()

    @property
    def frees_space(self) -> bool:
        """True if the operation never needs more room than it frees, so that it
        may use the headroom kept for removals when the store is full."""
        return False

    @abc.abstractmethod
    def plan(self, ctx: PlanContext) -> Result:
        """Check, record the writes, and return the result.

        Raises:
            one of ``OPERATION_ERRORS``: the operation cannot be applied; it
                must raise before recording any write or change.
        """


class Removal(Operation):
    """An operation that only removes data: it never needs more room than it
    frees, so it may use the headroom a full store keeps (see ``store``)."""

    __slots__ = ()

    @property
    def frees_space(self) -> bool:
        """Removing data: yes."""
        return True


@dataclass(frozen=True, slots=True)
class Together(Operation):
    """Apply ``ops`` in order, all or none: the first that fails undoes the
    others and fails this operation (inside an :class:`Attempt`, or an atomic
    unit, that is what lets one branch be several operations)."""

    ops: tuple[Operation, ...]

    @property
    def frees_space(self) -> bool:
        """Only if every operation does."""
        return all(op.frees_space for op in self.ops)

    def plan(self, ctx: PlanContext) -> Result:
        with ctx.savepoint() as savepoint:
            try:
                results = [op.plan(ctx) for op in self.ops]
            except OPERATION_ERRORS:
                savepoint.roll_back()
                raise
        return results[0] if results else Done()


@dataclass(frozen=True, slots=True)
class Attempt(Operation):
    """Apply ``first``; if it fails with a per-operation error, apply ``otherwise`` instead."""

    first: Operation
    otherwise: Operation

    @property
    def frees_space(self) -> bool:
        """Only if both operations do."""
        return self.first.frees_space and self.otherwise.frees_space

    def plan(self, ctx: PlanContext) -> Result:
        with ctx.savepoint() as savepoint:
            try:
                return self.first.plan(ctx)
            except OPERATION_ERRORS as exc:
                savepoint.roll_back()
                error: StoreError = exc
        return Fallback(error, self.otherwise.plan(ctx))


# --------------------------------------------------------------------------- units


@dataclass(frozen=True, slots=True)
class Unit:
    """Operations applied together; ``atomic`` ones all or none."""

    ops: tuple[Operation, ...]
    atomic: bool = True

    @property
    def frees_space(self) -> bool:
        """True if every operation only frees space (see :attr:`Operation.frees_space`)."""
        return all(op.frees_space for op in self.ops)


@dataclass(frozen=True, slots=True)
class UnitOutcome:
    """What became of a unit: one result per operation, in order."""

    results: tuple[Result, ...]

    @property
    def error(self) -> StoreError | None:
        """The first failure among the results, or ``None``."""
        for result in self.results:
            if type(result) is Failed:
                return result.error
        return None

    @classmethod
    def failed(cls, unit: Unit, error: StoreError) -> UnitOutcome:
        """The outcome of a unit none of whose operations could be applied."""
        return cls((Failed(error),) + (SKIPPED,) * (len(unit.ops) - 1))
