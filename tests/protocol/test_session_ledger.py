"""The counting half of an MQQB session (``qmgr.protocol.session_ledger``): whole counts
from u16 ones, what a SessionHeader completes, and what a SessionAck reports."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import wire
from qmgr.protocol.session_ledger import BITMAP_BITS, U16, ReceiveLedger, SendLedger, unwrap


def header(acked: int, base: int = 0, flags: int = 0) -> wire.SessionHeader:
    return wire.SessionHeader(
        ack_sequence_number=acked % U16,
        recoverable_ack_sequence_number=base % U16,
        recoverable_ack_flags=flags,
    )


@given(st.integers(0, 10**9), st.integers(0, U16 - 1))
def test_unwrap_finds_the_whole_count_at_or_below_the_reference(reference: int, back: int) -> None:
    whole = unwrap((reference - back) % U16, reference)
    assert whole == reference - back
    assert whole % U16 == (reference - back) % U16


def test_express_packets_are_done_once_acknowledged_recoverable_ones_once_stored() -> None:
    ledger = SendLedger()
    for tag in ("e1", "r1", "r2", "e2"):
        ledger.record(recoverable=tag.startswith("r"), tag=tag)
    assert (ledger.sent, ledger.recoverable_sent, ledger.in_flight) == (4, 2, 4)
    assert ledger.apply(header(3)) == ["e1"]  # r1, r2 wait to be reported stored
    assert (ledger.in_flight, ledger.unpersisted) == (1, 2)
    assert ledger.apply(header(3)) == []  # no progress: nothing more
    # r1 below the base, r2 marked (the base's bit), e2 acknowledged.
    assert ledger.apply(header(4, base=2, flags=0b1)) == ["r1", "r2", "e2"]
    assert not ledger.outstanding


def test_a_session_ack_reports_the_stored_numbers_from_a_true_base() -> None:
    ledger = ReceiveLedger()
    numbers = [ledger.count(recoverable=True) for _ in range(4)]
    assert numbers == [1, 2, 3, 4]
    assert ledger.count(recoverable=False) is None
    assert ledger.take_ack() == (0, 0)  # nothing stored: no base is true
    assert ledger.persisted(2)
    assert not ledger.persisted(2)  # not awaiting it any more
    assert ledger.reportable() == 0  # 1 is not stored: no base below 2 is true
    assert ledger.persisted(1)
    assert ledger.take_ack() == (1, 0b11)
    assert ledger.unreported == 0
    assert ledger.persisted(4)
    # 3 is not stored: the base is the stored prefix (2), and 4 is marked.
    assert ledger.take_ack() == (2, 0b101)
    assert ledger.take_ack() == (2, 0b1)  # nothing new: the stored prefix, restated
    assert (ledger.awaiting_persist, ledger.pending) == (1, 0)


def test_one_ack_marks_at_most_the_bitmap_and_the_rest_wait() -> None:
    ledger = ReceiveLedger()
    for _ in range(BITMAP_BITS + 5):
        ledger.persisted(ledger.count(recoverable=True) or 0)
    base, flags = ledger.take_ack()
    assert (base, flags) == (1, 0xFFFFFFFF)
    assert ledger.pending == 5
    assert ledger.take_ack() == (BITMAP_BITS + 1, 0b11111)


def test_a_base_that_wraps_to_zero_still_reports_what_is_stored() -> None:
    """Counts are u16 on the wire: once 65,536 recoverable packets were sent, the
    lowest stored number of a bitmap may be 0 there. With its bitmap it is a base,
    not "none"."""
    ledger = SendLedger()
    for tag in range(U16 + 2):
        ledger.record(recoverable=True, tag=tag)
    assert ledger.apply(header(U16 - 1, base=U16 - 3, flags=0b111)) == list(range(U16 - 1))
    done = ledger.apply(header(U16 + 2, base=U16, flags=0b111))
    assert done == [U16 - 1, U16, U16 + 1]
    assert not ledger.outstanding
    assert ledger.apply(header(U16 + 2, base=0, flags=0)) == []  # no base, nothing new
