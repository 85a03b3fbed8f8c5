"""The FinalAck courier (``qmgr.server.workers.final_ack_courier``) over a real store: what it
sends on which connection, how many at a time, and what it forgets."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import structlog
import trio
import trio.testing
from peer_kit import StoreCommitter

import storage
import wire
from qmgr.server.workers import final_ack_courier
from qmgr.server.workers.final_ack_courier import FinalAckCourier, FinalAckTag

A = uuid.UUID("a0000000-0000-4000-8000-00000000000a")
B = uuid.UUID("b0000000-0000-4000-8000-00000000000b")
#: A FinalAck record: the class, the sequence ordinal and timestamp, number, previous.
RECORD = struct.Struct(">HIIII")


@dataclass(eq=False)
class Carrier:
    """A connection as the courier sees it."""

    closing: bool = False
    sent: list[tuple[wire.FinalAck, bool, object]] = field(default_factory=list)

    def send_user_packet(
        self, data: bytes, *, recoverable: bool = False, tag: object = None
    ) -> None:
        decoder = wire.FrameDecoder()
        decoder.receive_data(data)
        packet = decoder.next_packet()
        assert isinstance(packet, wire.UserMessage)
        self.sent.append((wire.FinalAck.from_message(packet), recoverable, tag))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[storage.Store]:
    store = storage.Store(tmp_path / "store", initial_map_size=1 << 22, durable=False)
    records = [
        storage.RecordFinalAck(
            source.bytes, ordinal, RECORD.pack(wire.MessageClass.ACK_RECEIVE, 1, 5, ordinal, 0)
        )
        for source, ordinal in ((A, 1), (A, 2), (A, 3), (B, 9))
    ]
    store.commit([storage.Unit(tuple(records))], now=0.0)
    yield store
    store.close()


def courier(store: storage.Store, paths: dict[bytes, Carrier]) -> FinalAckCourier:
    return FinalAckCourier(
        store,
        StoreCommitter(store),  # type: ignore[arg-type]
        lambda: paths,
        structlog.get_logger("test"),
    )


def test_each_source_gets_its_final_acks_once_per_connection(store: storage.Store) -> None:
    to_a = Carrier()
    sender = courier(store, {A.bytes: to_a})  # no connection reaches B
    sender.send_waiting()
    assert [(ack.acked_source_qm, ack.acked_message_id) for ack, _, _ in to_a.sent] == [
        (A, 1),
        (A, 2),
        (A, 3),
    ]
    first, recoverable, tag = to_a.sent[0]
    assert recoverable
    assert tag == FinalAckTag(A.bytes + (1).to_bytes(4, "big"))
    assert (first.source_qm, first.destination_qm) == (store.qm_guid, A)
    assert first.sequence_number == 1
    assert first.message_class == wire.MessageClass.ACK_RECEIVE
    sender.send_waiting()
    assert len(to_a.sent) == 3  # in flight: not again on the same connection
    sender.connection_ended(to_a)
    again = Carrier()
    sender = courier(store, {A.bytes: again})
    sender.send_waiting()
    assert len(again.sent) == 3
    assert sender.sent == 3


def test_a_final_ack_kept_for_another_destination_goes_as_its_sender_made_it(
    store: storage.Store,
) -> None:
    # A router kept C's FinalAck about A's message 1 (A was unreachable), beside
    # its own about the same message: both go, each from its sender.
    c = uuid.UUID("c0000000-0000-4000-8000-00000000000c")
    kept = storage.RecordFinalAck(
        A.bytes,
        1,
        RECORD.pack(wire.MessageClass.NACK_RECEIVE_TIMEOUT, 2, 6, 4, 3),
        stamp=6,
        sender=c.bytes,
    )
    store.commit([storage.Unit((kept,))], now=0.0)
    to_a = Carrier()
    courier(store, {A.bytes: to_a}).send_waiting()
    about_1 = [(ack, tag) for ack, _, tag in to_a.sent if ack.acked_message_id == 1]
    assert [(ack.source_qm, ack.message_class) for ack, _ in about_1] == [
        (store.qm_guid, wire.MessageClass.ACK_RECEIVE),
        (c, wire.MessageClass.NACK_RECEIVE_TIMEOUT),
    ]
    [(theirs, tag)] = about_1[1:]
    assert (theirs.sequence_id, theirs.sequence_number, theirs.previous_sequence_number) == (
        wire.TxSequenceId(ordinal=2, timestamp=6),
        4,
        3,
    )
    assert tag == FinalAckTag(A.bytes + (1).to_bytes(4, "big") + (6).to_bytes(4, "big") + c.bytes)


def test_at_most_in_flight_per_connection(
    store: storage.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(final_ack_courier, "IN_FLIGHT", 2)
    to_a = Carrier()
    sender = courier(store, {A.bytes: to_a})
    sender.send_waiting()
    assert len(to_a.sent) == 2
    first = A.bytes + (1).to_bytes(4, "big")
    sender.acked(to_a, FinalAckTag(first))
    store.commit([storage.Unit((storage.ForgetFinalAcks((first,)),))], now=0.0)  # its forget
    sender.send_waiting()
    assert [ack.acked_message_id for ack, _, _ in to_a.sent] == [1, 2, 3]


async def test_an_acknowledged_final_ack_is_forgotten(
    store: storage.Store, autojump_clock: trio.testing.MockClock
) -> None:
    to_a = Carrier()
    sender = courier(store, {A.bytes: to_a})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender.run)
        await trio.sleep(final_ack_courier.POLL_SECONDS * 2)
        for _, _, tag in to_a.sent[:2]:
            assert isinstance(tag, FinalAckTag)
            sender.acked(to_a, tag)
        await trio.sleep(1.0)
        nursery.cancel_scope.cancel()
    left = store.final_acks(source_qm=A.bytes)
    assert [int.from_bytes(pending.key[16:], "big") for pending in left] == [3]
    assert store.final_ack_count() == 2  # A's third, and B's


class FailingOnce(StoreCommitter):
    """Fails the first unit's batch whole."""

    failed = False

    async def submit(self, unit: storage.Unit) -> storage.UnitOutcome:
        if not self.failed:
            self.failed = True
            raise storage.StoreError("I/O error (simulated)")
        return await super().submit(unit)


async def test_a_forget_that_fails_is_logged_and_the_final_acks_go_out_again(
    store: storage.Store, autojump_clock: trio.testing.MockClock
) -> None:
    to_a = Carrier()
    paths = {A.bytes: to_a}
    sender = FinalAckCourier(
        store,
        FailingOnce(store),  # type: ignore[arg-type]
        lambda: paths,
        structlog.get_logger("test"),
    )
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender.run)
            await trio.sleep(final_ack_courier.POLL_SECONDS * 2)
            for _, _, tag in list(to_a.sent):
                assert isinstance(tag, FinalAckTag)
                sender.acked(to_a, tag)
            await trio.sleep(final_ack_courier.RETRY_SECONDS + final_ack_courier.POLL_SECONDS)
            assert len(to_a.sent) == 6  # not forgotten: sent again
            for _, _, tag in to_a.sent[3:]:
                assert isinstance(tag, FinalAckTag)
                sender.acked(to_a, tag)
            await trio.sleep(1.0)
            nursery.cancel_scope.cancel()
    assert [log["event"] for log in logs] == ["final_ack_forget_failed"]
    assert store.final_ack_count() == 1  # B's
