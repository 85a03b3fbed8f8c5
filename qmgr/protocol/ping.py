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
* a ping gets its answer, unless its source has had
  :data:`ANSWERS_PER_SOURCE` answers in the last second, or all sources
  together :data:`ANSWERS_PER_SECOND` (token buckets of those sizes; the
  sources' are kept for the :data:`SOURCES_KEPT` seen last): a ping's source
  address can be forged, so the answers, as large as the requests, are
  bounded in rate and cannot be turned into a flood at someone else, and one
  sender that pings without end uses up its own share, not the others'
  (:attr:`PingResponder.dropped` counts those not answered).

No I/O, no clock, no logging: the trio side (``qmgr.server.peering.ping``)
moves the datagrams.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import Final

import wire

__all__ = ["ANSWERS_PER_SECOND", "ANSWERS_PER_SOURCE", "SOURCES_KEPT", "PingResponder"]

#: Ping answers sent per second at most (and at once, after a quiet second).
ANSWERS_PER_SECOND: Final = 100
#: Ping answers to one source address per second at most.
ANSWERS_PER_SOURCE: Final = 5
#: Source addresses whose buckets are kept (the least recently seen go first).
SOURCES_KEPT: Final = 4096


class _Bucket:
    """A token bucket: ``rate`` tokens a second, ``rate`` at most."""

    __slots__ = ("at", "rate", "tokens")

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self.tokens = float(rate)
        self.at: float | None = None

    def take(self, now: float) -> bool:
        """One token, if there is one at ``now``."""
        if self.at is not None:
            self.tokens = min(float(self.rate), self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class PingResponder:
    """Answers pings for the queue manager ``local_qm`` (see the module docstring)."""

    def __init__(
        self,
        local_qm: uuid.UUID,
        *,
        rate: int = ANSWERS_PER_SECOND,
        per_source: int = ANSWERS_PER_SOURCE,
    ) -> None:
        self.local_qm = local_qm
        self.rate = rate
        self.per_source = per_source
        #: Datagrams that were not pings.
        self.malformed = 0
        #: Pings not answered, past the rate.
        self.dropped = 0
        #: Pings answered.
        self.answered = 0
        self._all = _Bucket(rate)
        self._sources: OrderedDict[str, _Bucket] = OrderedDict()

    def answer(
        self, datagram: bytes, *, source: str = "", refuse: bool, now: float
    ) -> bytes | None:
        """The datagram to send back for ``datagram`` from the address ``source``,
        or None (not a ping, or past a rate). ``refuse``: a session from its
        sender would be refused."""
        try:
            ping = wire.parse_ping(datagram)
        except wire.ProtocolError:
            self.malformed += 1
            return None
        if not self._take(source, now):
            self.dropped += 1
            return None
        flags = ping.flags & wire.PingFlags.CLIENT
        if refuse:
            flags |= wire.PingFlags.REFUSE
        self.answered += 1
        return wire.build_ping(wire.Ping(flags=int(flags), cookie=ping.cookie, qm=self.local_qm))

    def _take(self, source: str, now: float) -> bool:
        """A token of ``source``'s bucket and of the common one, if both have one."""
        sources = self._sources
        bucket = sources.get(source)
        if bucket is None:
            bucket = sources[source] = _Bucket(self.per_source)
            if len(sources) > SOURCES_KEPT:
                sources.popitem(last=False)
        else:
            sources.move_to_end(source)
        if not bucket.take(now):
            return False
        if not self._all.take(now):
            bucket.tokens += 1.0  # not answered: the source's token is not spent
            return False
        return True
