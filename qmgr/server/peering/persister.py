"""What arrived over one peer connection, written to the store in runs.

Theory of operation
-------------------
A peer connection's reader hands each arrived packet's operations to its
:class:`Persister` (:meth:`Persister.store`) and goes on decoding; the
persister's task takes everything stored since its last write as one
**run** and submits it to the committer as one atomic unit, which shares
the sync with every client's commit. Only once that unit is synced does
each packet's follow-up run (its ``after``), in the order the packets
came: the receiver hears the message is persisted, and the packet counts
in a SessionAck and, transactional, in an OrderAck. So a streaming peer is
written in runs, not one message per sync, and nothing is acknowledged
before it is durable.

A run writes, last, one record per incoming stream it advanced: where the
stream stood before the run's first message of it (the write checks it)
and the state after its last message, built once per stream and write
rather than per message.

* **Bounded.** The reader stops reading while :data:`MAX_RUN_BYTES` of
  arrived messages wait to be written (:meth:`Persister.room`): a peer that
  ignores our window cannot fill memory.
* **Failures.** A write that fails (a full store, a disk error) rolls back
  the receiver's acceptances of the run (as if the messages never arrived,
  so that their resends are accepted again), marks the persister
  :attr:`~Persister.failed`, and ends the connection: the peer resends on
  its next session. What was stored but never taken when the connection
  ends is rolled back the same way (:meth:`Persister.abandon`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

import trio

import storage
from qmgr.protocol import Accepted, StreamKey

from .close_reasons import PeerClosed
from .parts import PeeringParts

__all__ = ["MAX_RUN_BYTES", "Persister"]

#: The reader stops reading while this many bytes of arrived messages wait to
#: be written (a peer that ignores our window cannot fill memory).
MAX_RUN_BYTES: Final = 32 * 1024 * 1024


@dataclass(slots=True, eq=False)
class _Run:
    """What arrived since the last write, and what to do once it is persisted."""

    ops: list[storage.Operation] = field(default_factory=list)
    #: Called with the results of its packet's ops, in order, once they are persisted.
    after: list[Callable[[list[storage.Result]], None]] = field(default_factory=list)
    #: (slice of ops) for each callback.
    spans: list[tuple[int, int]] = field(default_factory=list)
    #: Incoming streams advanced by this run: where each stood before the run's
    #: first message of it (the ``follows`` to write), and the state record of
    #: its last message, which the run's unit writes last.
    streams: dict[StreamKey, tuple[tuple[int, int] | None, storage.RecordIncoming]] = field(
        default_factory=dict
    )
    #: The receiver's acceptances in this run: rolled back if its write fails.
    accepted: list[Accepted] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.after)

    def add(
        self,
        ops: tuple[storage.Operation, ...],
        after: Callable[[list[storage.Result]], None],
        *,
        accepted: Accepted | None,
        stream: StreamKey | None,
        record: storage.RecordIncoming | None,
    ) -> None:
        """One packet's part of the write (see :meth:`Persister.store`)."""
        start = len(self.ops)
        self.ops.extend(ops)
        self.spans.append((start, len(self.ops)))
        self.after.append(after)
        if accepted is not None:
            self.accepted.append(accepted)
        if stream is not None and record is not None:
            # The write checks where the stream stood before its first message;
            # popped, so that insertion order follows the last update.
            follows, _ = self.streams.pop(stream, (record.follows, record))
            self.streams[stream] = (follows, record)

    def records(self) -> list[storage.RecordIncoming]:
        """The last record of each stream, written with where the stream stood
        before the run (built once per stream and write, not per message)."""
        return [
            record if record.follows == follows else dataclasses.replace(record, follows=follows)
            for follows, record in self.streams.values()
        ]


class Persister:
    """Writes what arrived over one connection, in runs (see the module docstring).

    Args:
        parts: the daemon's parts (the committer).
        rolled_back: told the receiver's acceptances whose write failed, or
            will never happen.
    """

    def __init__(
        self, parts: PeeringParts, rolled_back: Callable[[Sequence[Accepted]], None]
    ) -> None:
        self.parts = parts
        self._rolled_back = rolled_back
        #: A write failed (a full store, a disk error): the connection ends, and
        #: the peer resends what it carried on its next session.
        self.failed = False
        self._run = _Run()
        self._bytes = 0  # bytes read since the task last took a run
        self._taken = trio.Event()
        self._wake = trio.Event()
        self._closed = False

    def __len__(self) -> int:
        """Packets stored and not yet taken by a write."""
        return len(self._run)

    def store(
        self,
        ops: tuple[storage.Operation, ...],
        after: Callable[[list[storage.Result]], None],
        *,
        accepted: Accepted | None = None,
        stream: StreamKey | None = None,
        record: storage.RecordIncoming | None = None,
    ) -> None:
        """Add an arrived packet's operations (perhaps none) to the next write;
        ``after`` runs once they are persisted, with their results, after those
        of every packet stored before it. ``accepted`` is the receiver's
        acceptance (rolled back if the write fails); ``record`` writes where the
        message's stream ``stream`` now stands: the write ends with the last
        record of each stream."""
        self._run.add(ops, after, accepted=accepted, stream=stream, record=record)

    def read(self, size: int) -> None:
        """The reader read ``size`` bytes and stored what they carried: wake the task."""
        if len(self._run):
            self._bytes += size
            self._wake.set()

    async def room(self) -> None:
        """Return once fewer than :data:`MAX_RUN_BYTES` wait to be written."""
        while self._bytes >= MAX_RUN_BYTES:
            self._taken = trio.Event()
            await self._taken.wait()

    def close(self) -> None:
        """The connection is ending: write what was stored, then return."""
        self._closed = True
        self._wake.set()

    def abandon(self) -> None:
        """The connection ended: what was stored and never taken by a write is
        rolled back, so that its resends are accepted on the next connection."""
        self._closed = True
        if self._run.accepted:
            self._rolled_back(self._run.accepted)
            self._run.accepted = []

    async def run(self) -> None:
        """Write the runs until :meth:`close` and nothing is left.

        Raises:
            PeerClosed: a write failed; the connection must end.
        """
        while True:
            if not len(self._run):
                if self._closed:
                    return
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            run, self._run = self._run, _Run()
            self._bytes = 0
            self._taken.set()
            unit = storage.Unit((*run.ops, *run.records()))
            try:
                outcome = await self.parts.committer.submit(unit)
            except Exception as exc:
                self._fail(run)
                msg = f"could not store arrived messages: {exc}"
                raise PeerClosed(msg) from exc
            if outcome.error is not None:
                self._fail(run)
                msg = f"could not store arrived messages: {outcome.error}"
                raise PeerClosed(msg)
            results = list(outcome.results)
            for (start, end), after in zip(run.spans, run.after, strict=True):
                after(results[start:end])

    def _fail(self, run: _Run) -> None:
        self._rolled_back(run.accepted)
        self.failed = True
