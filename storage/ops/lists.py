"""Distribution lists: named sets of destinations kept by the queue manager.

Theory of operation
-------------------
The ``lists`` database keys each list by its canonical name (lower-case UTF-8)
and keeps its display name and its targets, format names as the layer above
wrote and checked them, in order. The store does not interpret the targets;
a send to a list reads it when the send is prepared, so a change applies to
the sends prepared after it. Operations see the earlier operations of their
batch (the batch's scratch state), like every other.

Record, version 1: version u8, display name length u16 and the name, target
count u16, then each target's length u16 and its UTF-8.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from ..catalog import Catalog
from ..context import PlanContext
from ..environment import Environment
from ..errors import InvalidRecord, ListExists, ListMissing, StoreCorrupt
from ..units import Done, Operation, Removal, Result

__all__ = [
    "CreateList",
    "DeleteList",
    "DistributionList",
    "SetListTargets",
    "read_list",
    "read_lists",
]

_VERSION: Final = 1
_U16 = struct.Struct(">H")
#: Longest target or display name, in UTF-8 bytes.
MAX_TEXT: Final = 0xFFFF


@dataclass(frozen=True, slots=True)
class DistributionList:
    """A distribution list as stored."""

    #: Canonical (lower-case) name.
    name: str
    display_name: str
    #: Format names, in the order they were added.
    targets: tuple[str, ...]


def _encode(value: DistributionList) -> bytes:
    if len(value.targets) > 0xFFFF:
        msg = f"distribution list {value.name!r} has too many targets"
        raise InvalidRecord(msg)
    parts = [bytes((_VERSION,))]
    for text in (value.display_name, *value.targets):
        data = text.encode()
        if len(data) > MAX_TEXT:
            msg = f"distribution list text of {len(data)} bytes is too long"
            raise InvalidRecord(msg)
        parts.append(_U16.pack(len(data)) + data)
        if text is value.display_name:
            parts.append(_U16.pack(len(value.targets)))
    return b"".join(parts)


def _decode(name: str, data: bytes | memoryview) -> DistributionList:
    try:
        texts = _texts(memoryview(data))
    except (ValueError, IndexError, struct.error, UnicodeDecodeError) as exc:
        msg = f"distribution list {name!r} record is corrupt"
        raise StoreCorrupt(msg) from exc
    return DistributionList(name, texts[0], tuple(texts[1:]))


def _texts(view: memoryview) -> list[str]:
    """The display name then the targets of a record (ValueError if it is garbled)."""
    if view[0] != _VERSION:
        msg = "unknown version"
        raise ValueError(msg)
    (length,) = _U16.unpack_from(view, 1)
    texts = [bytes(view[3 : 3 + length]).decode()]
    offset = 3 + length
    (count,) = _U16.unpack_from(view, offset)
    offset += 2
    for _ in range(count):
        (length,) = _U16.unpack_from(view, offset)
        end = offset + 2 + length
        if end > len(view):
            msg = "truncated"
            raise ValueError(msg)
        texts.append(bytes(view[offset + 2 : end]).decode())
        offset = end
    if offset != len(view):
        msg = "trailing bytes"
        raise ValueError(msg)
    return texts


def _current(ctx: PlanContext, name: str) -> bytes | None:
    return ctx.record(ctx.dbs.lists, name.encode())


def _put(ctx: PlanContext, value: DistributionList) -> None:
    ctx.write_record(ctx.dbs.lists, value.name.encode(), _encode(value))


@dataclass(frozen=True, slots=True)
class CreateList(Operation):
    """Create a distribution list.

    Raises (when planned):
        ListExists: a list of that name exists.
    """

    value: DistributionList

    def plan(self, ctx: PlanContext) -> Result:
        if _current(ctx, self.value.name) is not None:
            raise ListExists(self.value.name)
        _put(ctx, self.value)
        return Done()


@dataclass(frozen=True, slots=True)
class SetListTargets(Operation):
    """Replace the targets of a distribution list.

    Raises (when planned):
        ListMissing: there is no list of that name.
    """

    name: str
    targets: tuple[str, ...]

    def plan(self, ctx: PlanContext) -> Result:
        data = _current(ctx, self.name)
        if data is None:
            raise ListMissing(self.name)
        old = _decode(self.name, data)
        _put(ctx, DistributionList(self.name, old.display_name, self.targets))
        return Done()


@dataclass(frozen=True, slots=True)
class DeleteList(Removal):
    """Delete a distribution list (messages already sent to it are not affected).

    Raises (when planned):
        ListMissing: there is no list of that name.
    """

    name: str

    def plan(self, ctx: PlanContext) -> Result:
        if _current(ctx, self.name) is None:
            raise ListMissing(self.name)
        ctx.write_record(ctx.dbs.lists, self.name.encode(), None)
        return Done()


def read_list(env: Environment, catalog: Catalog, name: str) -> DistributionList | None:
    """One distribution list, or None."""
    with env.read("read_list") as txn:
        data = txn.get(name.encode(), db=catalog.dbs.lists)
    return None if data is None else _decode(name, data)


def read_lists(env: Environment, catalog: Catalog) -> list[DistributionList]:
    """Every distribution list, by name."""
    with env.read("read_lists") as txn, txn.cursor(db=catalog.dbs.lists) as cursor:
        return [_decode(bytes(key).decode(), value) for key, value in cursor]
