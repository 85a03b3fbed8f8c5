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
from collections.abc import Callable
from typing import Any, Final

import click

from qmgr.client import Acknowledge, Journal

__all__ = ["ACK_LEVELS", "JOURNAL_LEVELS", "report_options"]

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
        reports: dict[str, Any] = {}
        level = 0
        for name in ack:
            level |= ACK_LEVELS[name]
        if level and not admin_queue:
            msg = "--ack needs --admin-queue (where the acknowledgments go)"
            raise click.UsageError(msg)
        if level:
            reports["acknowledge"] = level
        if admin_queue:
            reports["admin_queue"] = admin_queue
        if response_queue:
            reports["response_queue"] = response_queue
        journal_level = 0
        for name in journal:
            journal_level |= JOURNAL_LEVELS[name]
        if journal_level:
            reports["journal"] = journal_level
        if ttrq is not None:
            reports["time_to_reach_queue"] = ttrq
        if ttbr is not None:
            reports["time_to_be_received"] = ttbr
        return command(*args, reports=reports, **kwargs)

    options = [
        click.option("--admin-queue", help="Where acknowledgments go (a queue or format name)."),
        click.option("--response-queue", help="Where the receiver should answer."),
        click.option(
            "--ack",
            multiple=True,
            type=click.Choice(sorted(ACK_LEVELS)),
            help="Acknowledgments to send to --admin-queue (repeatable): "
            "pos-arrival, pos-receive, neg-arrival, neg-receive, or full-receive, ...",
        ),
        click.option(
            "--journal",
            multiple=True,
            type=click.Choice(sorted(JOURNAL_LEVELS)),
            help="Copies this queue manager keeps (repeatable): deadletter (if it dies "
            "or is not confirmed received in time), journal (once delivered or confirmed).",
        ),
        click.option(
            "--ttrq",
            type=click.FloatRange(min=0),
            help="Seconds the message has to reach its queue (default: no limit).",
        ),
        click.option(
            "--ttbr",
            type=click.FloatRange(min=0),
            help="Seconds the message has to be received (default: no limit).",
        ),
    ]
    decorated: Callable[..., Any] = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated
