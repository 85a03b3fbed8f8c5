"""The store's meta values: settings, the message-id ordinal limit, reclaiming space.

Theory of operation
-------------------
``meta`` (see ``keys``) holds, besides the schema version and the counters
the context keeps, the layer above's *settings* (UTF-8 text under
``setting:<key>``, :class:`SetSetting`, read back with ``Store.settings``;
:class:`ClearSetting` removes one, which only frees space)
and the *ordinal limit*, the store's half of message identity: the layer
above hands out message-id ordinals below it and raises it
(:class:`ReserveOrdinals`) in the same batch as the messages, or before, so
after a crash it starts again from the limit and never reuses an ordinal.
:class:`ReclaimSpace` rewrites an empty ``reclaim`` key: a write that
changes nothing that matters, which lets LMDB reuse the pages freed before it
(the store writes two of them when the map is full).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..context import PlanContext
from ..keys import META_RECLAIM, setting_key
from ..units import Done, Operation, Removal, Result

__all__ = ["ClearSetting", "ReclaimSpace", "ReserveOrdinals", "SetSetting"]


@dataclass(frozen=True, slots=True)
class ReserveOrdinals(Operation):
    """Raise the store's message-id ordinal limit to ``limit`` (never lowers it)."""

    limit: int

    def plan(self, ctx: PlanContext) -> Result:
        ctx.reserve_ordinals(self.limit)
        return Done()


@dataclass(frozen=True, slots=True)
class SetSetting(Operation):
    """Store a setting (UTF-8 text under a key)."""

    key: str
    value: str

    def plan(self, ctx: PlanContext) -> Result:
        ctx.put_meta(setting_key(self.key), self.value.encode())
        return Done()


@dataclass(frozen=True, slots=True)
class ClearSetting(Removal):
    """Remove a setting, if it is there (it then reads as absent); it only frees
    space, so it is written on a full store too."""

    key: str

    def plan(self, ctx: PlanContext) -> Result:
        ctx.discard(ctx.dbs.meta, setting_key(self.key))
        return Done()


@dataclass(frozen=True, slots=True)
class ReclaimSpace(Operation):
    """A write that changes nothing that matters, so that LMDB may reuse the pages
    freed by the writes before it (it does so two write transactions later)."""

    @property
    def frees_space(self) -> bool:
        """It needs a page or two, and is written in the headroom."""
        return True

    def plan(self, ctx: PlanContext) -> Result:
        ctx.put_meta(META_RECLAIM, b"")
        return Done()
