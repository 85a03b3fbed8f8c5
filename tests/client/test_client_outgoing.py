"""The SDK's outgoing-queue calls and status fields: conversions, the core, both clients."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid

import pytest
import trio
from fake_daemon import BILLING, ORDERS, QM_GUID, SOURCE_QM, FakeDaemon

import qmgr.client as sdk
from qmgr.client import (
    ConnectionLost,
    IncomingInfo,
    InvalidArgument,
    NotSupported,
    OutgoingInfo,
    QueueNotFound,
    Status,
    connect,
    open_client,
)
from qmgr.client import _replies as reply_values
from qmgr.client._protocol import ClientProtocol, Waiter
from wire import client_frames as cf

UTC = dt.UTC
WIRE_OUTGOING = cf.OutgoingInfo(
    destination=ORDERS,
    next_hop="10.0.0.9:1801",
    state="waiting",
    next_attempt=1_700_000_100.25,
    waiting=12,
    unacknowledged=3,
    sequence_timestamp=1_700_000_000,
    sequence_ordinal=2,
    next_number=16,
    last_order_ack=None,
    last_error="connection refused",
)
WIRE_INCOMING = cf.IncomingInfo(
    source_qm=SOURCE_QM,
    queue="payments",
    sequence_timestamp=1_650_000_000,
    sequence_ordinal=4,
    last_number=41,
    reject_count=2,
    last_access=20.5,
)


def _stamp(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, UTC)


# ----------------------------------------------------------------------
# The public values
# ----------------------------------------------------------------------


def test_outgoing_info_from_wire() -> None:
    info = OutgoingInfo.from_wire(WIRE_OUTGOING)
    assert (info.destination, info.next_hop, info.state) == (ORDERS, "10.0.0.9:1801", "waiting")
    assert info.next_attempt == _stamp(1_700_000_100.25)
    assert info.next_attempt is not None
    assert info.next_attempt.tzinfo is UTC
    assert info.last_order_ack is None
    assert (info.waiting, info.unacknowledged, info.next_number) == (12, 3, 16)
    assert (info.sequence_timestamp, info.sequence_ordinal) == (1_700_000_000, 2)
    assert info.sequence == "1700000000:2"
    assert info.last_error == "connection refused"
    acked = OutgoingInfo.from_wire(
        dataclasses.replace(WIRE_OUTGOING, next_attempt=None, last_order_ack=0.0)
    )
    assert acked.next_attempt is None
    assert acked.last_order_ack == dt.datetime(1970, 1, 1, tzinfo=UTC)  # 0.0 is a time, not None


def test_incoming_info_from_wire() -> None:
    info = IncomingInfo.from_wire(WIRE_INCOMING)
    assert (info.source_qm, info.queue) == (SOURCE_QM, "payments")
    assert info.sequence == "1650000000:4"
    assert (info.last_number, info.reject_count) == (41, 2)
    assert info.last_access == dt.datetime(1970, 1, 1, 0, 0, 20, 500000, tzinfo=UTC)


def test_status_carries_outgoing_queues_and_incoming_sequences() -> None:
    wire_status = cf.StatusInfo(
        qm_name="qm",
        qm_guid=QM_GUID,
        server_version="1",
        started_at=1.0,
        connections=1,
        open_transactions=0,
        commits=0,
        aborts=0,
        batches=0,
        uncommitted_bytes=0,
        erasing=0,
        queues=(),
        outgoing=(WIRE_OUTGOING,),
        incoming=(WIRE_INCOMING, WIRE_INCOMING),
    )
    status = Status.from_wire(wire_status)
    assert status.outgoing == (OutgoingInfo.from_wire(WIRE_OUTGOING),)
    assert status.incoming == (IncomingInfo.from_wire(WIRE_INCOMING),) * 2
    bare = Status.from_wire(dataclasses.replace(wire_status, outgoing=(), incoming=()))
    assert (bare.outgoing, bare.incoming) == ((), ())


def test_the_new_values_are_public_and_documented() -> None:
    for name in ("OutgoingInfo", "IncomingInfo"):
        assert name in sdk.__all__
        assert getattr(sdk, name).__doc__
    for cls in (sdk.QueueManager, sdk.AsyncQueueManager):
        for method in ("outgoing", "pause_outgoing", "resume_outgoing", "purge_outgoing"):
            assert getattr(cls, method).__doc__, f"{cls.__name__}.{method}"


# ----------------------------------------------------------------------
# Reply conversions and the protocol core
# ----------------------------------------------------------------------

HELLO_OK = cf.HelloOk(version=2, qm_name="", qm_guid=uuid.UUID(int=0), server_version="")


def test_outgoing_replies_are_converted_and_the_wrong_kind_refused() -> None:
    listed = cf.OutgoingList(outgoing=(WIRE_OUTGOING, WIRE_OUTGOING), purged=0)
    assert reply_values.outgoing_list(listed) == [OutgoingInfo.from_wire(WIRE_OUTGOING)] * 2
    assert reply_values.outgoing_list(cf.OutgoingList(outgoing=())) == []
    changed = cf.OutgoingList(outgoing=(WIRE_OUTGOING,), purged=7)
    assert reply_values.outgoing_changed(changed) == (OutgoingInfo.from_wire(WIRE_OUTGOING), 7)
    for convert in (reply_values.outgoing_list, reply_values.outgoing_changed):
        with pytest.raises(ConnectionLost, match="answered HelloOk, not OutgoingList"):
            convert(HELLO_OK)
    for count in (0, 2):
        with pytest.raises(ConnectionLost, match=f"answered with {count} outgoing queues, not 1"):
            reply_values.outgoing_changed(cf.OutgoingList(outgoing=(WIRE_OUTGOING,) * count))


def test_outgoing_requests_go_out_as_their_frames() -> None:
    proto: ClientProtocol[Waiter] = ClientProtocol("x:1", Waiter, address_in_stream_errors=False)
    out = bytearray()
    listing = proto.request(out, cf.ListOutgoing())
    control = proto.request(out, cf.ControlOutgoing(action=3, destination=ORDERS))
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(bytes(out))
    assert decoder.next_frame() == cf.Frame(request_id=listing.request_id, value=cf.ListOutgoing())
    frame = decoder.next_frame()
    assert frame is not None
    assert frame.value == cf.ControlOutgoing(action=3, destination=ORDERS)
    reply = cf.OutgoingList(outgoing=(WIRE_OUTGOING,), purged=12)
    proto.receive_data(cf.encode_frame(control.request_id, reply))
    assert proto.result(control) == reply
    with pytest.raises(InvalidArgument, match="cannot send this request"):
        proto.request(bytearray(), cf.ControlOutgoing(action=1, destination="\ud800"))


# ----------------------------------------------------------------------
# The blocking client against a scripted daemon
# ----------------------------------------------------------------------


def test_blocking_outgoing_calls(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        listed = qm.outgoing()
        assert [q.destination for q in listed] == [ORDERS, BILLING]
        assert listed[0].next_attempt == _stamp(1_700_000_100.0)
        assert listed[1].last_order_ack == _stamp(1_700_000_050.5)
        paused = qm.pause_outgoing(ORDERS)
        assert (paused.destination, paused.state, paused.next_attempt) == (ORDERS, "paused", None)
        assert qm.resume_outgoing(ORDERS).state == "connecting"
        assert qm.purge_outgoing(ORDERS) == 12
        assert qm.purge_outgoing(ORDERS) == 0
        with pytest.raises(QueueNotFound, match="no outgoing queue for 'nowhere'"):
            qm.pause_outgoing("nowhere")
        status = qm.status()
    assert [o.destination for o in status.outgoing] == [ORDERS, BILLING]
    assert status.outgoing[0].waiting == 0
    assert [i.source_qm for i in status.incoming] == [SOURCE_QM]
    controls = fake_daemon.requests_of(cf.ControlOutgoing)
    assert [(c.action, c.destination) for c in controls] == [
        (1, ORDERS),
        (2, ORDERS),
        (3, ORDERS),
        (3, ORDERS),
        (1, "nowhere"),
    ]
    assert len(fake_daemon.requests_of(cf.ListOutgoing)) == 1


def test_blocking_calls_say_when_peering_is_not_running(fake_daemon: FakeDaemon) -> None:
    fake_daemon.peering.running = False
    with connect(fake_daemon.address) as qm:
        with pytest.raises(NotSupported, match="peering is not running"):
            qm.outgoing()
        with pytest.raises(NotSupported, match="peering is not running"):
            qm.purge_outgoing(ORDERS)
        status = qm.status()
    assert (status.outgoing, status.incoming) == ((), ())


# ----------------------------------------------------------------------
# The trio client against a scripted daemon
# ----------------------------------------------------------------------


async def test_trio_outgoing_calls(fake_daemon: FakeDaemon) -> None:
    async with open_client(fake_daemon.address) as qm:
        listed = await qm.outgoing()
        assert [q.destination for q in listed] == [ORDERS, BILLING]
        assert (await qm.pause_outgoing(BILLING)).state == "paused"
        assert (await qm.resume_outgoing(BILLING)).state == "connecting"
        assert await qm.purge_outgoing(ORDERS) == 12
        with pytest.raises(QueueNotFound):
            await qm.resume_outgoing("nowhere")
        async with trio.open_nursery() as nursery:  # several tasks share the client
            for _ in range(3):
                nursery.start_soon(qm.outgoing)
        status = await qm.status()
    assert status.outgoing[0].waiting == 0
    assert status.incoming[0].reject_count == 2
    controls = fake_daemon.requests_of(cf.ControlOutgoing)
    assert [(c.action, c.destination) for c in controls] == [
        (1, BILLING),
        (2, BILLING),
        (3, ORDERS),
        (2, "nowhere"),
    ]
    assert len(fake_daemon.requests_of(cf.ListOutgoing)) == 4


async def test_trio_calls_say_when_peering_is_not_running(fake_daemon: FakeDaemon) -> None:
    fake_daemon.peering.running = False
    async with open_client(fake_daemon.address) as qm:
        with pytest.raises(NotSupported):
            await qm.pause_outgoing(ORDERS)
        assert (await qm.status()).outgoing == ()
