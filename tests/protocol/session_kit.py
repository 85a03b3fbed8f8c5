"""Two MQQB sessions (``qmgr.protocol.session``) talking through real packet
bytes, without sockets, for the session's tests: packets and byte streams,
the endpoints and the link between them. Time is the explicit ``now`` of
every call.
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import wire
from qmgr.protocol import (
    Acked,
    Action,
    Arrived,
    Close,
    Opened,
    PeerSession,
    Role,
    Send,
    SessionSettings,
    SessionState,
)

from .model_kit import A_QM, B_QM, T0

PacketT = TypeVar("PacketT", bound=wire.Packet)

FULL_BITMAP = 0xFFFFFFFF
DEFAULTS = SessionSettings()

# --------------------------------------------------------------------------
# Packets and byte streams
# --------------------------------------------------------------------------


def user_message(
    tag: int, *, recoverable: bool, session: wire.SessionHeader | None = None
) -> wire.UserMessage:
    """A user packet whose message id is ``tag``."""
    return wire.UserMessage(
        user=wire.UserHeader(
            source_qm=A_QM,
            sent_time=1_700_000_000,
            message_id=tag,
            delivery=wire.DeliveryMode.RECOVERABLE if recoverable else wire.DeliveryMode.EXPRESS,
            destination=wire.PrivateQueueId(number=7),
        ),
        properties=wire.MessagePropertiesHeader(body=b"message %d" % tag),
        session=session,
    )


def user_packet(tag: int, *, recoverable: bool) -> bytes:
    return wire.build_packet(user_message(tag, recoverable=recoverable))


def decode(data: bytes) -> wire.Packet:
    """The one packet in ``data``."""
    decoder = wire.FrameDecoder()
    decoder.receive_data(data)
    packet = decoder.next_packet()
    assert packet is not None
    assert decoder.buffered == 0
    return packet


def sent(action: object, kind: type[PacketT]) -> PacketT:
    """The packet of kind ``kind`` that a :class:`Send` action carries."""
    assert isinstance(action, Send)
    packet = decode(action.data)
    assert isinstance(packet, kind)
    return packet


def header_of(action: Action) -> wire.SessionHeader:
    """The SessionHeader of a Send(SessionAck)."""
    assert isinstance(action, Send)
    packet = decode(action.data)
    assert isinstance(packet, wire.SessionAck)
    return packet.session


Chunker = Callable[[bytes], Iterator[bytes]]


def whole(data: bytes) -> Iterator[bytes]:
    yield data


def byte_by_byte(data: bytes) -> Iterator[bytes]:
    for index in range(len(data)):
        yield data[index : index + 1]


def odd_chunks(data: bytes) -> Iterator[bytes]:
    sizes = itertools.cycle((1, 3, 7, 13, 31, 2, 97, 5, 577))
    offset = 0
    while offset < len(data):
        size = next(sizes)
        yield data[offset : offset + size]
        offset += size


# --------------------------------------------------------------------------
# Two sessions and the link between them
# --------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class Endpoint:
    """One side: its session, its decoder, and what its session reported."""

    session: PeerSession
    decoder: wire.FrameDecoder = dataclasses.field(default_factory=wire.FrameDecoder)
    #: Packets on their way to this side, one per item.
    inbox: list[bytes] = dataclasses.field(default_factory=list)
    opened: list[Opened] = dataclasses.field(default_factory=list)
    arrived: list[Arrived] = dataclasses.field(default_factory=list)
    acked: list[object] = dataclasses.field(default_factory=list)
    closed: list[str] = dataclasses.field(default_factory=list)
    #: Recoverable numbers arrived and not yet passed to persisted().
    to_persist: list[int] = dataclasses.field(default_factory=list)


class Pair:
    """An initiator (``a``) and an acceptor (``b``) joined by an in-memory link."""

    def __init__(
        self,
        *,
        a_settings: SessionSettings = DEFAULTS,
        b_settings: SessionSettings = DEFAULTS,
        expect: uuid.UUID | None = B_QM,
        a_qm: uuid.UUID = A_QM,
        b_qm: uuid.UUID = B_QM,
        now: float = T0,
        chunker: Chunker = whole,
    ) -> None:
        self.a = Endpoint(
            PeerSession(
                Role.INITIATOR, local_qm=a_qm, remote_qm=expect, settings=a_settings, now=now
            )
        )
        self.b = Endpoint(PeerSession(Role.ACCEPTOR, local_qm=b_qm, settings=b_settings, now=now))
        self.chunker = chunker
        self.cache: dict[bytes, wire.Packet] | None = None

    def other(self, side: Endpoint) -> Endpoint:
        return self.b if side is self.a else self.a

    def apply(self, side: Endpoint, actions: Sequence[Action]) -> Sequence[Action]:
        for action in actions:
            if isinstance(action, Send):
                self.other(side).inbox.append(action.data)
            elif isinstance(action, Opened):
                side.opened.append(action)
            elif isinstance(action, Arrived):
                side.arrived.append(action)
                if action.recoverable_number is not None:
                    side.to_persist.append(action.recoverable_number)
            elif isinstance(action, Acked):
                side.acked.extend(action.tags)
            else:
                assert isinstance(action, Close)
                side.closed.append(action.reason)
        return actions

    def deliver(self, side: Endpoint, now: float, *, count: int | None = None) -> None:
        """Carry the packets waiting for ``side`` (all, or the first ``count``) into it."""
        taken = side.inbox[:count] if count is not None else list(side.inbox)
        del side.inbox[: len(taken)]
        if self.cache is not None:  # fast path for long runs: parse each distinct packet once
            for data in taken:
                packet = self.cache.get(data)
                if packet is None:
                    packet = self.cache[data] = decode(data)
                self.apply(side, side.session.receive(packet, now))
            return
        for chunk in self.chunker(b"".join(taken)):
            side.decoder.receive_data(chunk)
            while (packet := side.decoder.next_packet()) is not None:
                self.apply(side, side.session.receive(packet, now))

    def pump(self, now: float) -> None:
        while self.a.inbox or self.b.inbox:
            self.deliver(self.a, now)
            self.deliver(self.b, now)

    def open(self, now: float = T0) -> None:
        self.apply(self.a, self.a.session.start(now))
        self.apply(self.b, self.b.session.start(now))
        self.pump(now)
        assert self.a.session.state is SessionState.OPEN
        assert self.b.session.state is SessionState.OPEN

    def send(self, side: Endpoint, tag: int, *, recoverable: bool, now: float) -> None:
        data = user_packet(tag, recoverable=recoverable)
        written = side.session.send(data, recoverable=recoverable, tag=tag, now=now)
        assert written == data
        self.other(side).inbox.append(written)

    def persist(self, side: Endpoint, now: float, number: int | None = None) -> Sequence[Action]:
        """Persist ``number`` (default: the oldest arrived) at ``side``."""
        if number is None:
            number = side.to_persist[0]
        side.to_persist.remove(number)
        return self.apply(side, side.session.persisted(number, now))

    def persist_all(self, side: Endpoint, now: float) -> None:
        while side.to_persist:
            self.persist(side, now)

    def tick(self, side: Endpoint, now: float) -> Sequence[Action]:
        return self.apply(side, side.session.timer(now))


def state_of(session: PeerSession) -> SessionState:
    """The session's state (a call, so that mypy does not narrow it across calls)."""
    return session.state


def same_tags(reported: Sequence[object], expected: Iterable[object]) -> bool:
    """Whether ``reported`` holds each expected tag exactly once, in any order."""
    return len(reported) == len(set(reported)) and set(reported) == set(expected)


def opened_pair(**options: Any) -> Pair:
    pair = Pair(**options)
    pair.open()
    return pair
