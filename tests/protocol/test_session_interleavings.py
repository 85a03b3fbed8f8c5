"""PeerSession under random interleavings of both sides' actions
(``qmgr.protocol.session``), checked by a Hypothesis state machine."""

from __future__ import annotations

import itertools

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import wire
from qmgr.protocol import (
    SessionSettings,
    SessionState,
)

from .model_kit import T0
from .session_kit import (
    Endpoint,
    Pair,
    decode,
    opened_pair,
    same_tags,
)

# --------------------------------------------------------------------------
# Random interleavings
# --------------------------------------------------------------------------

SIDES = st.sampled_from(["a", "b"])


class Interleavings(RuleBasedStateMachine):
    """Random interleavings of sends, deliveries, persists, lost SessionAcks and time.

    Invariants: no tag is reported twice; a tag is reported only once the peer
    delivered it and, if recoverable, persisted it. At the end, once everything
    is delivered and stored and the timers ran, each sender has everything
    acknowledged or its session closed (after a lost ack, by the ack-wait timer).
    """

    def __init__(self) -> None:
        super().__init__()
        self.pair = Pair()
        self.now = T0
        self.tags = itertools.count()
        self.sent: dict[str, list[object]] = {"a": [], "b": []}
        self.ack_timeout = 20.0
        self.dropped = False

    def side(self, name: str) -> Endpoint:
        return self.pair.a if name == "a" else self.pair.b

    @initialize(window=st.integers(1, 40), ack_timeout=st.sampled_from([20.0, 60.0]))
    def open(self, window: int, ack_timeout: float) -> None:
        session_settings = SessionSettings(
            window_size=window, ack_timeout=ack_timeout, idle_timeout=1e9
        )
        self.pair = opened_pair(a_settings=session_settings, b_settings=session_settings)
        self.ack_timeout = ack_timeout

    @rule(name=SIDES, recoverable=st.booleans())
    def send(self, name: str, recoverable: bool) -> None:
        endpoint = self.side(name)
        if endpoint.session.can_send():
            tag = next(self.tags)
            self.pair.send(endpoint, tag, recoverable=recoverable, now=self.now)
            self.sent[name].append(tag)

    @rule(name=SIDES, count=st.integers(1, 4))
    def deliver(self, name: str, count: int) -> None:
        self.pair.deliver(self.side(name), self.now, count=count)

    @rule(name=SIDES)
    def lose_a_session_ack(self, name: str) -> None:
        inbox = self.side(name).inbox
        if inbox and isinstance(decode(inbox[0]), wire.SessionAck):
            del inbox[0]
            self.dropped = True

    @rule(name=SIDES, index=st.integers(0, 50))
    def persist(self, name: str, index: int) -> None:
        endpoint = self.side(name)
        if endpoint.to_persist:
            number = endpoint.to_persist[index % len(endpoint.to_persist)]
            self.pair.persist(endpoint, self.now, number)

    @rule(milliseconds=st.sampled_from([100, 500, 5_000]))
    def wait(self, milliseconds: int) -> None:
        self.now += milliseconds / 1000
        self.run_due_timers()

    @rule(name=SIDES)
    def sleep_until_deadline(self, name: str) -> None:
        """Time jumps to the side's next deadline, as its adapter's sleep would."""
        self.now = max(self.now, self.side(name).session.next_deadline() or self.now)
        self.run_due_timers()

    def run_due_timers(self) -> None:
        for endpoint in (self.pair.a, self.pair.b):
            deadline = endpoint.session.next_deadline()
            if deadline is not None and self.now >= deadline:
                self.pair.tick(endpoint, self.now)

    @invariant()
    def reported_once_and_only_when_stored(self) -> None:
        for endpoint in (self.pair.a, self.pair.b):
            peer = self.pair.other(endpoint)
            waiting = set(peer.to_persist)
            stored = {
                d.packet.user.message_id
                for d in peer.arrived
                if d.recoverable_number is None or d.recoverable_number not in waiting
            }
            assert len(endpoint.acked) == len(set(endpoint.acked)), "a tag was reported twice"
            assert set(endpoint.acked) <= stored, "a tag was reported before it was stored"

    def settled(self, endpoint: Endpoint) -> bool:
        session = endpoint.session
        if session.state is SessionState.CLOSED:
            return True
        return session.unacked == 0 and session.unpersisted == 0

    def teardown(self) -> None:
        # Drain: everything arrives and is stored; time jumps from deadline to
        # deadline until each side has nothing outstanding or has closed.
        pair = self.pair
        for _ in range(50):
            pair.pump(self.now)
            pair.persist_all(pair.a, self.now)
            pair.persist_all(pair.b, self.now)
            pair.pump(self.now)
            self.reported_once_and_only_when_stored()
            if self.settled(pair.a) and self.settled(pair.b):
                break
            deadlines = [
                deadline
                for deadline in (pair.a.session.next_deadline(), pair.b.session.next_deadline())
                if deadline is not None
            ]
            self.now = max(self.now, min(deadlines))
            self.run_due_timers()
        else:
            raise AssertionError("the sessions did not settle")
        for name in ("a", "b"):
            endpoint = self.side(name)
            if endpoint.session.state is not SessionState.CLOSED:
                assert same_tags(endpoint.acked, self.sent[name])
        if not self.dropped and not (pair.a.closed or pair.b.closed):
            assert len(pair.a.acked) == len(self.sent["a"])
            assert len(pair.b.acked) == len(self.sent["b"])


TestRandomInterleavings = Interleavings.TestCase
TestRandomInterleavings.settings = settings(max_examples=500, stateful_step_count=60)
