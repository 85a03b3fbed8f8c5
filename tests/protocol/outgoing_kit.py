"""What the tests of ``OutgoingSequence`` (``qmgr.protocol.outgoing``) share: sequence ids,
a machine with entries of given kinds, and what it sends."""

from __future__ import annotations

import wire
from qmgr.protocol import EntryKind, OutgoingSequence, Transmission

SEQ = wire.TxSequenceId(ordinal=1, timestamp=1_700_000_000)
SEQ2 = wire.TxSequenceId(ordinal=2, timestamp=1_700_000_000)
OTHER_QUEUE = wire.TxSequenceId(ordinal=1, timestamp=1_700_000_001)
T0 = 1_000.0
TX = EntryKind.TRANSACTIONAL


def sequence(*kinds: EntryKind, base: int = 0, first: int | None = None) -> OutgoingSequence:
    """A sequence with entries of these kinds at consecutive lookup ids after ``base``."""
    machine = OutgoingSequence(sequence_id=SEQ, base=base)
    start = base + 1 if first is None else first
    for offset, kind in enumerate(kinds):
        machine.add(start + offset, kind)
    return machine


def roll_pending(machine: OutgoingSequence) -> bool:
    """The property, through a call (mypy keeps a narrowed attribute across calls)."""
    return machine.roll_pending


def drain(machine: OutgoingSequence, now: float = T0) -> list[Transmission]:
    """Everything the machine sends now."""
    out = []
    while (transmission := machine.next_transmission(now)) is not None:
        out.append(transmission)
    return out


def numbers(transmissions: list[Transmission]) -> list[tuple[int, int, int]]:
    """(lookup id, number, previous) of the transactional transmissions."""
    out = []
    for transmission in transmissions:
        header = transmission.header
        assert header is not None
        out.append(
            (transmission.lookup_id, header.sequence_number, header.previous_sequence_number)
        )
    return out
