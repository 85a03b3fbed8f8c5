"""The trailers of existing client frames (versions 5 and 10), between values and
construct containers.

:mod:`wire.client.poison` describes the trailers, :mod:`wire.client.layouts`
defines their construct entries and puts them after the bodies of earlier
versions, and :mod:`wire.client.layout_codec` converts the rest of those
frames. Here are the conversions of the trailers: a list's trailer has one
entry per element or none at all, so a value list either carries its version 5
values on every element or on none (:func:`counters_trailer`), and a queue
list's trailer is left out when no queue has retry settings
(:func:`retry_trailer`). Version 10's quota trailer of ``SetQueueProperties``
is there only when the quota changes (:func:`quota_change`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..protocol_errors import LocalProtocolError
from .layouts import optional_container, optional_value
from .poison import MessageCounters, RetrySettings, SetQueueProperties
from .values import CreateQueue, QueuedMessage, QueueInfo

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")

__all__ = [
    "counters_to_container",
    "counters_trailer",
    "quota_change",
    "quota_fields",
    "retry_fields",
    "retry_trailer",
    "retry_values",
    "with_counters",
    "with_retry",
]


def counters_to_container(counters: MessageCounters) -> dict[str, Any]:
    """A counters record as ``COUNTERS_ENTRY`` builds it."""
    return {
        "abort_count": counters.abort_count,
        "move_count": counters.move_count,
        "last_move_time": counters.last_move_time,
    }


def counters_trailer(messages: Sequence[QueuedMessage]) -> list[dict[str, Any]]:
    """The counters trailer of a list of messages (empty when none has counters).

    Raises:
        LocalProtocolError: some have counters and some not.
    """
    present = [m.counters for m in messages if m.counters is not None]
    if present and len(present) != len(messages):
        msg = "every QueuedMessage or none must carry its version 5 values"
        raise LocalProtocolError(msg, field="QueuedMessage")
    return [counters_to_container(found) for found in present]


def with_counters(
    messages: tuple[QueuedMessage, ...], trailer: Sequence[Any]
) -> tuple[QueuedMessage, ...]:
    """The messages with the counters of a parsed trailer (as they are if it is empty)."""
    return _with_trailer(
        messages,
        trailer,
        "counters",
        lambda entry: MessageCounters(
            abort_count=entry.abort_count,
            move_count=entry.move_count,
            last_move_time=entry.last_move_time,
        ),
    )


def retry_trailer(queues: Sequence[QueueInfo]) -> list[dict[str, Any]]:
    """The retry-settings trailer of a list of queues (empty when no queue has any)."""
    if all(q.retry is None for q in queues):
        return []
    return [
        {"present": False, "retry_count": 0, "retry_cycles": 0, "retry_delay": 0.0}
        if q.retry is None
        else {
            "present": True,
            "retry_count": q.retry.retry_count,
            "retry_cycles": q.retry.retry_cycles,
            "retry_delay": q.retry.retry_delay,
        }
        for q in queues
    ]


def with_retry(queues: tuple[QueueInfo, ...], trailer: Sequence[Any]) -> tuple[QueueInfo, ...]:
    """The queues with the retry settings of a parsed trailer (as they are if it is empty)."""
    return _with_trailer(
        queues,
        trailer,
        "retry",
        lambda entry: (
            RetrySettings(
                retry_count=entry.retry_count,
                retry_cycles=entry.retry_cycles,
                retry_delay=entry.retry_delay,
            )
            if entry.present
            else None
        ),
    )


def _with_trailer(
    values: tuple[T, ...], trailer: Sequence[Any], name: str, value_of: Callable[[Any], object]
) -> tuple[T, ...]:
    """``values`` with the field ``name`` of each set from its trailer entry (as they are if
    the trailer is empty: a trailer has one entry per value or none)."""
    if not trailer:
        return values
    return tuple(
        dataclasses.replace(value, **{name: value_of(entry)})
        for value, entry in zip(values, trailer, strict=True)
    )


def retry_fields(value: CreateQueue | SetQueueProperties) -> dict[str, Any]:
    """The three optional retry values of a request, as ``CREATE_RETRY`` builds them."""
    return {
        "retry_count": optional_container(value.retry_count, 0),
        "retry_cycles": optional_container(value.retry_cycles, 0),
        "retry_delay": optional_container(value.retry_delay, 0.0),
    }


def quota_change(value: SetQueueProperties) -> dict[str, Any] | None:
    """The version 10 trailer of a ``SetQueueProperties``, as ``QUOTA_CHANGE``
    builds it (None: no trailer, the quota is unchanged).

    Raises:
        LocalProtocolError: both a quota and ``no_quota``, or a quota that is
            not a whole number of bytes from 0 to 2**64 - 1 (checked here: the
            layout's optional trailer would leave out one it cannot build).
    """
    quota = value.quota
    if quota is not None and (
        type(quota) is not int or not 0 <= quota < 1 << 64  # a bool is not a quota
    ):
        msg = f"a quota must be a whole number of bytes from 0 to 2**64 - 1, not {quota!r}"
        raise LocalProtocolError(msg[:200], field="SetQueueProperties.quota")
    if value.no_quota:
        if value.quota is not None:
            msg = "a quota and no_quota at once"
            raise LocalProtocolError(msg, field="SetQueueProperties.quota")
        return optional_container(None, 0)
    return None if value.quota is None else optional_container(value.quota, 0)


def quota_fields(trailer: Any) -> dict[str, Any]:
    """The keyword arguments ``quota`` and ``no_quota`` of a parsed ``QUOTA_CHANGE``
    trailer (or of none)."""
    if trailer is None:
        return {}
    quota = optional_value(trailer)
    return {"quota": quota} if quota is not None else {"no_quota": True}


def retry_values(container: Any) -> dict[str, Any]:
    """The keyword arguments of the three optional retry values parsed by ``CREATE_RETRY``."""
    return {
        name: optional_value(container[name])
        for name in ("retry_count", "retry_cycles", "retry_delay")
    }
