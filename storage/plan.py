"""Planning a batch of units into writes, applying them, and installing the result.

Theory of operation
-------------------
A batch goes through three steps:

1. :func:`plan_batch` runs on the store's owner thread. It opens one read
   transaction and gives each operation a :class:`PlanContext`: a view of
   the committed state (the catalog) with the batch's own changes laid
   over it. Operations check, then record *writes* (put a new key, put,
   delete an existing key, delete a key if it is there) and change queue
   counters, meta counters and outgoing states in the overlay.
   Savepoints (per atomic unit, per operation of a non-atomic unit, inside
   ``Attempt``) roll back both the writes and the overlay. At the end every
   queue the batch touched gets its record written once, and so does every
   outgoing state it changed and every meta counter. Nothing is written
   to LMDB here and nothing in the catalog changes. (The context is in
   ``context``, the write list, savepoints and scratch state in ``overlay``,
   the operations in ``units`` and ``ops``.)
2. :func:`apply_plan` runs the writes in one write transaction and commits
   it. It touches nothing but LMDB and the plan, so it may run on another
   thread (the daemon's writer thread), as long as only one batch is
   applied at a time and no other batch is planned meanwhile. A write that
   does not match the plan (a "new" key that exists, a key to delete that
   does not) means the file and the catalog disagree: ``StoreCorrupt``, and
   nothing is applied.
3. :meth:`Plan.install` runs on the owner thread after the commit: the
   catalog takes the new records (the context's :class:`~storage.context.Install`).
   A batch that failed is simply dropped; the catalog never saw it.

Because every result is decided in step 1, the expensive part of a commit
(the sync in step 2) can overlap whatever the owner thread does next, and
the write transaction itself holds no Python logic but a loop of puts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .catalog import Catalog
from .context import Install, PlanContext
from .environment import Environment, Txn
from .errors import StoreCorrupt
from .overlay import DISCARD, PUT, PUT_NEW, Write
from .units import OPERATION_ERRORS, SKIPPED, Failed, Result, Unit, UnitOutcome

__all__ = ["Plan", "apply_plan", "plan_batch"]


@dataclasses.dataclass(slots=True, eq=False)
class Plan:
    """A planned batch: the writes to apply and what each unit's outcome will be."""

    units: Sequence[Unit]
    writes: list[Write]
    outcomes: list[UnitOutcome]
    #: Every unit only frees space: it may use the headroom kept for removals.
    privileged: bool
    _install: Install

    def install(self, catalog: Catalog) -> list[UnitOutcome]:
        """Put the committed result in the catalog; returns the outcomes."""
        self._install.apply(catalog)
        return self.outcomes


def plan_batch(
    env: Environment, catalog: Catalog, units: Sequence[Unit], *, now: float, privileged: bool
) -> Plan:
    """Plan ``units`` (in order) as one batch; see the module docstring.

    Raises:
        StoreError: a batch-level failure reading the store (nothing planned).
    """
    outcomes: list[UnitOutcome] = []
    context = PlanContext(catalog, env, now)
    try:
        for unit in units:
            outcomes.append(_plan_unit(context, unit))
        install = context.finish()
    finally:
        context.close()
    return Plan(
        units=units,
        writes=context.writes,
        outcomes=outcomes,
        privileged=privileged,
        _install=install,
    )


def _plan_unit(context: PlanContext, unit: Unit) -> UnitOutcome:
    results: list[Result] = []
    if unit.atomic:
        try:
            with context.savepoint():
                for op in unit.ops:
                    results.append(op.plan(context))
        except OPERATION_ERRORS as exc:
            failed = len(results)
            return UnitOutcome(
                (SKIPPED,) * failed + (Failed(exc),) + (SKIPPED,) * (len(unit.ops) - failed - 1)
            )
        return UnitOutcome(tuple(results))
    for op in unit.ops:
        try:
            with context.savepoint():
                results.append(op.plan(context))
        except OPERATION_ERRORS as exc:
            results.append(Failed(exc))
    return UnitOutcome(tuple(results))


def apply_plan(env: Environment, plan: Plan) -> None:
    """Apply a plan's writes in one write transaction and commit it.

    Raises:
        MapFull: it did not fit in the map; grow the map and apply again.
        StoreFull: the disk is full; nothing applied.
        StoreCorrupt: the file does not match the plan; nothing applied.
        StoreError: any other failure; nothing applied.
    """
    writes = plan.writes
    disagree = "the store and its catalog disagree"

    def work(txn: Txn) -> None:
        put = txn.put
        delete = txn.delete
        for kind, db, key, value in writes:
            if kind == PUT_NEW:
                if not put(key, value, db=db, overwrite=False):
                    msg = f"key {key.hex()} is already in the store: {disagree}"
                    raise StoreCorrupt(msg)
            elif kind == PUT:
                put(key, value, db=db)
            elif kind == DISCARD:
                delete(key, db=db)
            elif not delete(key, db=db):
                msg = f"key {key.hex()} to delete is not in the store: {disagree}"
                raise StoreCorrupt(msg)

    env.write("commit", work, privileged=plan.privileged)
