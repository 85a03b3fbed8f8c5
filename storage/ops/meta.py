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
At an orderly stop, when nothing can take an ordinal any more, it gives back
the ones reserved and never used (:class:`ReturnOrdinals`), so that
restarts do not use up the 32-bit ordinals a block at a time.
:class:`ReclaimSpace` rewrites an empty ``reclaim`` key: a write that
changes nothing that matters, which lets LMDB reuse the pages freed before it
(the store writes two of them when the map is full).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog import Catalog
from ..context import PlanContext
from ..environment import Environment
from ..keys import META_RECLAIM, SETTING_KEY_PREFIX, setting_key
from ..records import stored_text
from ..units import Done, Operation, Removal, Result

__all__ = [
    "ClearSetting",
    "ReclaimSpace",
    "ReserveOrdinals",
    "ReturnOrdinals",
    "SetSetting",
    "read_setting",
    "read_settings",
]


@dataclass(frozen=True, slots=True)
class ReserveOrdinals(Operation):
    """Raise the store's message-id ordinal limit to ``limit`` (never lowers it)."""

    limit: int

    def plan(self, ctx: PlanContext) -> Result:
        ctx.reserve_ordinals(self.limit)
        return Done()


@dataclass(frozen=True, slots=True)
class ReturnOrdinals(Operation):
    """Lower the store's message-id ordinal limit to ``limit`` (never raises it):
    the count after the last ordinal used, written when no more can be taken."""

    limit: int

    def plan(self, ctx: PlanContext) -> Result:
        ctx.return_ordinals(self.limit)
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


def read_settings(
    env: Environment, catalog: Catalog, prefix: str, limit: int
) -> list[tuple[str, str]]:
    """The settings whose keys begin with ``prefix`` (at most ``limit``), in key order."""
    start = setting_key(prefix) if prefix else SETTING_KEY_PREFIX
    found: list[tuple[str, str]] = []
    what = f"a setting under {prefix!r}"
    with env.read("settings") as txn, txn.cursor(db=catalog.dbs.meta) as cursor:
        if not cursor.set_range(start):
            return found
        for raw_key, raw in cursor:
            if not raw_key.startswith(start) or len(found) >= limit:
                break
            key = stored_text(raw_key[len(SETTING_KEY_PREFIX) :], what)
            found.append((key, stored_text(raw, what)))
    return found


def read_setting(env: Environment, catalog: Catalog, key: str) -> str | None:
    """A setting stored with :class:`SetSetting`, or ``None``."""
    raw_key = setting_key(key)
    with env.read("get_setting") as txn:
        raw = txn.get(raw_key, db=catalog.dbs.meta)
    return None if raw is None else stored_text(raw, f"setting {key!r}")
