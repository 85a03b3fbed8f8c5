"""The answer to an MSMQ ping ([MS-MQQB] §2.1.2, §2.2.7, §3.1.5.1), as a sans-IO decision.

Theory of operation
-------------------
Before it opens a session, a Windows queue manager may ping the acceptor: one
24-byte UDP datagram to port 3527 (Flags, the signature ``0x5548``, a Cookie
and its own QMGuid). The acceptor answers with one datagram: the cookie
echoed, its own QMGuid, the RC bit of the request echoed, and RF set when it
would refuse a session from that address now. Windows since Vista answers only
when ``EnablePingService`` is set; qmgr answers only with ``peers.ping = true``.

:class:`PingResponder` decides, given the datagram, whether the sender would be
refused, and ``now`` (seconds, any monotonic origin):

* a datagram that is not a ping (size, signature) gets no answer (it is
  counted in :attr:`PingResponder.malformed`);
* a ping gets its answer, unless more than :data:`ANSWERS_PER_SECOND` answers
  have gone out in the last second (a token bucket of that size): a ping's
  source address can be forged, so the answers, as large as the requests,
  are bounded in rate and cannot be turned into a flood at someone else
  (:attr:`PingResponder.dropped` counts those not answered).

No I/O, no clock, no logging: the trio side (``qmgr.server.peering.ping``)
moves the datagrams.
"""

from __future__ import annotations

import uuid
from typing import Final

import wire

__all__ = ["ANSWERS_PER_SECOND", "PingResponder"]

#: Ping answers sent per second at most (and at once, after a quiet second).
ANSWERS_PER_SECOND: Final = 100


class PingResponder:
    """Answers pings for the queue manager ``local_qm`` (see the module docstring)."""

    def __init__(self, local_qm: uuid.UUID, *, rate: int = ANSWERS_PER_SECOND) -> None:
        self.local_qm = local_qm
        self.rate = rate
        #: Datagrams that were not pings.
        self.malformed = 0
        #: Pings not answered, past the rate.
        self.dropped = 0
        #: Pings answered.
        self.answered = 0
        self._tokens = float(rate)
        self._at: float | None = None

    def answer(self, datagram: bytes, *, refuse: bool, now: float) -> bytes | None:
        """The datagram to send back for ``datagram``, or None (not a ping, or
        past the rate). ``refuse``: a session from its sender would be refused."""
        try:
            ping = wire.parse_ping(datagram)
        except wire.ProtocolError:
            self.malformed += 1
            return None
        if not self._take(now):
            self.dropped += 1
            return None
        flags = ping.flags & wire.PingFlags.CLIENT
        if refuse:
            flags |= wire.PingFlags.REFUSE
        self.answered += 1
        return wire.build_ping(wire.Ping(flags=int(flags), cookie=ping.cookie, qm=self.local_qm))

    def _take(self, now: float) -> bool:
        """One token of the bucket, if there is one at ``now``."""
        if self._at is not None:
            self._tokens = min(float(self.rate), self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True
