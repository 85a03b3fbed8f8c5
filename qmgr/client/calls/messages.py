"""Reading a queue by lookup ids: ``peek_range``, ``remove_through``, ``measure_range``.

A reader that keeps its own position in a queue pages through it with
``peek_range`` (the daemon answers at most about 4 MB of messages per
request, so one call may take several), plans with ``measure_range`` and
removes what it has processed with ``remove_through``. The last two need
the protocol's ``TWO_PHASE_VERSION``.
"""

from __future__ import annotations

import contextlib
import operator
from dataclasses import dataclass
from typing import Final

from wire import client as cf

from .._common import TWO_PHASE_USE
from .._exceptions import InvalidArgument
from .._message import Message
from .._protocol import ClientProtocol, Flow, W
from .._replies import expect, ok_value

__all__ = ["RangeInfo", "measure_range", "peek_range", "remove_through"]

#: The most messages one ``PeekRange`` asks for (its ``max_count`` is a u32).
_MAX_PAGE: Final = 0xFFFFFFFF


def _whole(value: object, name: str) -> int:
    """``value`` as an ``int`` if it is a whole number (an ``int``, or what
    ``operator.index`` takes, as NumPy's integers); its range is the encoder's
    to check.

    Raises:
        InvalidArgument: it is not (None, a string, a float, a bool).
    """
    if not isinstance(value, bool):
        with contextlib.suppress(TypeError):
            return operator.index(value)  # type: ignore[arg-type]
    msg = f"{name} must be a whole number, not {value!r}"
    raise InvalidArgument(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class RangeInfo:
    """What :meth:`QueueManager.measure_range` found.

    Attributes:
        queue_id: the queue's id in the store. A queue deleted and created
            again under the same name gets a new one, so a reader that keeps
            lookup ids can tell that its position no longer means anything.
        count: visible messages counted (messages held by open or prepared
            transactions are not).
        last: the lookup id of the last message counted, or ``after`` if none was.
    """

    queue_id: int
    count: int
    last: int


def peek_range(
    proto: ClientProtocol[W], queue: str, after: int, max_count: int
) -> Flow[W, list[Message]]:
    """``peek_range()``: ``PeekRange`` requests until ``max_count`` messages are found or
    the queue has no more above ``after``.

    Raises:
        InvalidArgument: ``max_count`` or ``after`` is not a whole number or is
            negative, or ``after`` is over 2**64 - 1.
    """
    after, max_count = _whole(after, "after"), _whole(max_count, "max")
    if max_count < 0 or after < 0:
        msg = f"max and after must not be negative, not {max_count} and {after}"
        raise InvalidArgument(msg)
    found: list[Message] = []
    while (left := max_count - len(found)) > 0:
        # A page holds at most about 4 MB of messages: asking for u32 at most is no limit.
        page_size = min(left, _MAX_PAGE)
        reply = yield proto.call(cf.PeekRange(queue=queue, after=after, max_count=page_size))
        page = expect(reply, cf.MessageList).messages
        if not page:
            break
        found.extend(Message.from_wire(m) for m in page)
        after = found[-1].lookup_id
    return found


def remove_through(proto: ClientProtocol[W], queue: str, lookup_id: int) -> Flow[W, int]:
    """``remove_through()``: how many messages went."""
    request = cf.RemoveThrough(queue=queue, lookup_id=_whole(lookup_id, "lookup_id"))
    proto.require(cf.TWO_PHASE_VERSION, "remove_through()", TWO_PHASE_USE)
    return ok_value((yield proto.call(request)))


def measure_range(
    proto: ClientProtocol[W], queue: str, after: int, max_count: int
) -> Flow[W, RangeInfo]:
    """``measure_range()``."""
    after, max_count = _whole(after, "after"), _whole(max_count, "max_count")
    request = cf.MeasureRange(queue=queue, after=after, max_count=max_count)
    proto.require(cf.TWO_PHASE_VERSION, "measure_range()", TWO_PHASE_USE)
    measured = expect((yield proto.call(request)), cf.RangeInfo)
    return RangeInfo(queue_id=measured.queue_id, count=measured.count, last=measured.last)
