"""Bounds that keep clients from exhausting the daemon's memory (part of the core's setup)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Bounds that keep clients from exhausting the daemon's memory."""

    #: Sends plus receives in one transaction.
    max_transaction_operations: int = 100_000
    #: Body bytes sent in one transaction (once per destination queue).
    max_transaction_bytes: int = 256 << 20
    #: Bytes of messages held by all open transactions together.
    max_uncommitted_bytes: int = 512 << 20
    #: Prepared transactions waiting to be resolved.
    max_prepared: int = 10_000
    #: Seconds the outcome of a resolved global transaction id is kept.
    outcome_retention: float = 7 * 86400.0
    #: XactDelayReceiveNack: seconds a source waits past a message's time to be
    #: received for its confirmation (None: the smaller of that time and its
    #: time to reach the queue, as MSMQ does when the setting is absent).
    xact_delay_receive_nack: float | None = None
