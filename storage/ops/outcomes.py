"""Kept outcomes of transaction ids: recording them, pruning the oldest, reading them.

Theory of operation
-------------------
A transaction with a global id (an *xid*, see ``ops.prepared``) that ended,
committed or aborted, leaves its *outcome* in ``outcomes``, keyed by the
xid, with a key in ``outcome_times`` (resolved_at in u64 milliseconds, then
the xid) that orders the outcomes by age, so :class:`PruneOutcomes` deletes
the oldest first without a scan. An xid is used once: its outcome is what
makes a later prepare or record of it fail (``XidInUse``) and a resolve
of it the other way fail (``XidResolved``).

:func:`record_outcome` writes one (for ``ResolvePrepared`` and
``RecordOutcome``); within a batch each xid's outcome as the batch changed
it is kept in the batch's scratch state (:func:`outcome_of` reads it back),
so a later operation of the batch sees it although nothing is written yet;
a prune passes over the outcomes the batch changed, and leaves them to a
later step.

Reads open a read transaction, copy what they found and close it before
they return. Listings are in xid order (by UTF-8 bytes) and start at a
prefix with a seek (:func:`xid_prefix`).

An outcome is 9 bytes: the state u8 (1 committed, 2 aborted) and
``resolved_at`` f64 wall seconds, followed by the owner's name in UTF-8 when
the transaction had one.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Final

from ..catalog import Catalog
from ..context import PlanContext
from ..environment import Environment, prefixed
from ..errors import InvalidRecord, StoreCorrupt
from ..keys import MAX_U64, outcome_time_key, split_outcome_time_key, xid_key
from ..overlay import MISSING
from ..records import stored_text
from ..reservations import owner_bytes, owner_text
from ..units import Removal, Result

__all__ = [
    "OutcomeInfo",
    "PruneOutcomes",
    "Pruned",
    "decode_outcome",
    "encode_outcome",
    "known_xid",
    "milliseconds",
    "outcome_of",
    "read_outcome",
    "read_outcomes",
    "record_outcome",
    "xid_prefix",
    "xid_text",
]

_OUTCOME = struct.Struct(">Bd")
_COMMITTED: Final = 1
_ABORTED: Final = 2
#: Scratch keys of the outcomes the batch changed: ``(_SCRATCH, xid bytes)``.
_SCRATCH: Final = "outcome"


@dataclass(frozen=True, slots=True)
class OutcomeInfo:
    """The kept outcome of a transaction id."""

    xid: str
    #: True: committed; False: aborted.
    committed: bool
    #: Wall seconds when it was resolved.
    resolved_at: float
    #: The principal whose transaction it was ("": none known).
    owner: str = ""


@dataclass(frozen=True, slots=True)
class Pruned(Result):
    """Outcomes were deleted; ``done`` when none older than asked are left."""

    count: int
    done: bool


def milliseconds(wall: float) -> int:
    """Wall seconds as the u64 milliseconds that order ``outcome_times`` (clamped)."""
    if math.isnan(wall):
        return 0
    if math.isinf(wall):
        return 0 if wall < 0 else MAX_U64
    return min(max(math.floor(wall * 1000), 0), MAX_U64)


def encode_outcome(committed: bool, resolved_at: float, owner: str = "") -> bytes:
    """Encode an outcome: its state, when it was resolved, and whose it was.

    Raises:
        InvalidRecord: the owner's name is too long.
    """
    return _OUTCOME.pack(_COMMITTED if committed else _ABORTED, resolved_at) + owner_bytes(owner)


def decode_outcome(xid: str, data: bytes | memoryview) -> OutcomeInfo:
    """Decode the outcome of ``xid``.

    Raises:
        StoreCorrupt: the bytes are not an outcome.
    """
    if len(data) < _OUTCOME.size or data[0] not in (_COMMITTED, _ABORTED):
        msg = f"outcome of transaction {xid!r} is corrupt ({len(data)} bytes)"
        raise StoreCorrupt(msg)
    state, resolved_at = _OUTCOME.unpack_from(data)
    owner = owner_text(bytes(data[_OUTCOME.size :]))
    return OutcomeInfo(xid, state == _COMMITTED, resolved_at, owner)


def outcome_of(ctx: PlanContext, xid: str, raw: bytes) -> OutcomeInfo | None:
    """The outcome of ``xid`` (keyed ``raw``) as the batch sees it, or None.

    Raises:
        StoreCorrupt: the stored outcome does not decode.
    """
    seen = ctx.scratch((_SCRATCH, raw))
    if seen is not MISSING:
        assert seen is None or isinstance(seen, OutcomeInfo)
        return seen
    data = ctx.txn.get(raw, db=ctx.dbs.outcomes)
    return None if data is None else decode_outcome(xid, data)


def record_outcome(
    ctx: PlanContext, xid: str, raw: bytes, committed: bool, resolved_at: float, owner: str
) -> None:
    """Write the outcome of ``xid`` (keyed ``raw``) and its ``outcome_times`` key."""
    dbs = ctx.dbs
    ctx.put(dbs.outcomes, raw, encode_outcome(committed, resolved_at, owner))
    ctx.put(dbs.outcome_times, outcome_time_key(milliseconds(resolved_at), raw), b"")
    ctx.set_scratch((_SCRATCH, raw), OutcomeInfo(xid, committed, resolved_at, owner))


@dataclass(frozen=True, slots=True)
class PruneOutcomes(Removal):
    """Delete at most ``limit`` outcomes resolved before ``before`` (wall seconds,
    to the millisecond), oldest first.

    Outcomes this batch changed are left to a later step.
    """

    before: float
    limit: int

    def plan(self, ctx: PlanContext) -> Result:
        end = milliseconds(self.before)
        dbs = ctx.dbs
        count = 0
        more = False
        with ctx.txn.cursor(db=dbs.outcome_times) as cursor:
            positioned = cursor.first()
            while positioned:
                key = bytes(cursor.key())
                if len(key) <= 8:
                    msg = f"outcome time key {key.hex()} is corrupt"
                    raise StoreCorrupt(msg)
                resolved, raw = split_outcome_time_key(key)
                if resolved >= end:
                    break
                if ctx.scratch((_SCRATCH, raw)) is MISSING:
                    if count >= self.limit:
                        more = True
                        break
                    ctx.discard(dbs.outcome_times, key)
                    ctx.discard(dbs.outcomes, raw)
                    ctx.set_scratch((_SCRATCH, raw), None)
                    count += 1
                positioned = cursor.next()
        return Pruned(count, not more)


def xid_prefix(prefix: str) -> bytes | None:
    """The key prefix of xids starting with ``prefix``, or None if no xid can."""
    try:
        encoded = prefix.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return None if b"\x00" in encoded else encoded


def xid_text(raw: bytes) -> str:
    """An xid as keyed, read back.

    Raises:
        StoreCorrupt: it is not UTF-8.
    """
    return stored_text(raw, f"transaction id {raw!r}")


def known_xid(xid: str) -> bytes | None:
    """An xid as keyed, or None if it is malformed (so it names nothing stored)."""
    try:
        return xid_key(xid)
    except InvalidRecord:
        return None


def read_outcome(env: Environment, catalog: Catalog, xid: str) -> OutcomeInfo | None:
    """The kept outcome of ``xid``, or ``None`` (also for a malformed xid).

    Raises:
        StoreCorrupt: it does not decode.
    """
    raw = known_xid(xid)
    if raw is None:
        return None
    with env.read("outcome") as txn:
        data = txn.get(raw, db=catalog.dbs.outcomes)
        return None if data is None else decode_outcome(xid, data)


def read_outcomes(
    env: Environment, catalog: Catalog, prefix: str, limit: int | None, owner: str | None = None
) -> list[OutcomeInfo]:
    """Kept outcomes whose xid starts with ``prefix``, in xid order; at most
    ``limit`` (``None``: all); only those of ``owner`` unless it is None.

    Raises:
        StoreCorrupt: one does not decode.
    """
    start = xid_prefix(prefix)
    if start is None or (limit is not None and limit <= 0):
        return []
    found: list[OutcomeInfo] = []
    with env.read("outcomes") as txn, txn.cursor(db=catalog.dbs.outcomes) as cursor:
        for raw in prefixed(cursor, start):
            outcome = decode_outcome(xid_text(raw), cursor.value())
            if owner is None or outcome.owner == owner:
                found.append(outcome)
            if limit is not None and len(found) >= limit:
                break
    return found
