"""The ``qmgr send`` options that ask for reports of a message's fate.

``--ack`` (repeatable) chooses the acknowledgments sent to ``--admin-queue``;
``--journal`` (repeatable) the copies the sending queue manager keeps
(``deadletter``: in its dead-letter queue if the message dies or, transactional,
is not confirmed received in time; ``journal``: in ``system$;journal`` once it
is delivered or, transactional, confirmed received); ``--ttrq`` and ``--ttbr``
set the message's time to reach its queue and time to be received.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import click

from qmgr.client import Acknowledge, Journal

from .common import Seconds

__all__ = ["ACK_LEVELS", "JOURNAL_LEVELS", "report_options"]

F = TypeVar("F", bound=Callable[..., Any])

#: ``--ack`` names (MQMSG_ACKNOWLEDGMENT_*).
ACK_LEVELS: Final = {
    "none": Acknowledge.NONE,
    "pos-arrival": Acknowledge.POS_ARRIVAL,
    "pos-receive": Acknowledge.POS_RECEIVE,
    "neg-arrival": Acknowledge.NEG_ARRIVAL,
    "neg-receive": Acknowledge.NEG_RECEIVE,
    "full-reach-queue": Acknowledge.FULL_REACH_QUEUE,
    "nack-receive": Acknowledge.NACK_RECEIVE,
    "full-receive": Acknowledge.FULL_RECEIVE,
}
#: ``--journal`` names (MQMSG_JOURNAL levels).
JOURNAL_LEVELS: Final = {
    "none": Journal.NONE,
    "deadletter": Journal.DEADLETTER,
    "journal": Journal.JOURNAL,
}


def _levels_option(name: str, levels: Mapping[str, int], help: str) -> Callable[[F], F]:
    """A repeatable option whose values are the names of ``levels``."""
    return click.option(name, multiple=True, type=click.Choice(sorted(levels)), help=help)


def _seconds_option(name: str, help: str) -> Callable[[F], F]:
    """An optional number of seconds."""
    return click.option(name, type=Seconds(min=0), help=help)


_OPTIONS: Final = (
    click.option("--admin-queue", help="Where acknowledgments go (a queue or format name)."),
    click.option("--response-queue", help="Where the receiver should answer."),
    _levels_option(
        "--ack",
        ACK_LEVELS,
        "Acknowledgments to send to --admin-queue; repeat it to add levels: none, "
        "pos-arrival, pos-receive, neg-arrival, neg-receive, and the sums "
        "full-reach-queue (pos-arrival + neg-arrival), nack-receive (neg-arrival + "
        "neg-receive) and full-receive (pos-receive + neg-arrival + neg-receive); "
        "see docs/operations.md, Delivery outcomes.",
    ),
    _levels_option(
        "--journal",
        JOURNAL_LEVELS,
        "Copies this queue manager keeps (repeatable): deadletter (if it dies "
        "or is not confirmed received in time), journal (once delivered or confirmed).",
    ),
    _seconds_option("--ttrq", "Seconds the message has to reach its queue (default: no limit)."),
    _seconds_option("--ttbr", "Seconds the message has to be received (default: no limit)."),
)


def report_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the report options to a command; it receives them as one ``reports``
    dict of ``send()`` keyword arguments."""

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        admin_queue: str | None,
        response_queue: str | None,
        ack: tuple[str, ...],
        journal: tuple[str, ...],
        ttrq: float | None,
        ttbr: float | None,
        **kwargs: Any,
    ) -> Any:
        level = _combined(ack, ACK_LEVELS)
        if level and not admin_queue:
            msg = "--ack needs --admin-queue (where the acknowledgments go)"
            raise click.UsageError(msg)
        given = {
            "acknowledge": level,
            "admin_queue": admin_queue,
            "response_queue": response_queue,
            "journal": _combined(journal, JOURNAL_LEVELS),
        }
        reports: dict[str, Any] = {key: value for key, value in given.items() if value}
        if ttrq is not None:
            reports["time_to_reach_queue"] = ttrq
        if ttbr is not None:
            reports["time_to_be_received"] = ttbr
        return command(*args, reports=reports, **kwargs)

    decorated: Callable[..., Any] = wrapper
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return decorated


def _combined(names: tuple[str, ...], levels: Mapping[str, int]) -> int:
    """The levels ``names`` choose, or'ed together (0 for none)."""
    level = 0
    for name in names:
        level |= levels[name]
    return level
