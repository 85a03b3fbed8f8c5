"""How ``qmgr receive`` takes a message only once its output has taken it:
:class:`ShownReceiver`, and standard output as a pipe (whether its reader has
gone, and waiting until it has read what was written).

A write to a pipe succeeds as soon as the kernel has buffered it (64 KiB on
Linux), whether or not anyone ever reads it: a reader that exits (``| head``,
``less`` quit after a page) leaves what it did not read in the buffer, where
it is dropped. So ``qmgr receive`` writes one message at a time and waits,
with :func:`wait_until_read`, until the pipe holds none of it before
committing the receive.

Theory of operation. On Linux, ``ioctl(FIONREAD)`` on either end of a pipe
gives the bytes it holds unread, and ``poll`` on the write end reports
``POLLERR`` once no reader has it open. The wait is: flush the stream, then
repeat { no byte unread: read; reader gone: read only if no byte is unread
(it read everything, then left); else poll the write end for the reader's
departure, with a timeout from :data:`FIRST_WAIT` doubling up to
:data:`LONGEST_WAIT` }. A reader's departure ends the poll at once; a read
does not wake it (the write end has no event for it), hence the timeout,
which backs off so that a reader that takes its time (``less`` on its first
page) costs a few wake-ups a second, not a spinning core.

What "read" means is the kernel's: the reader took the bytes out of the pipe.
A reader that takes a block and discards it (``head -1`` reads a block and
prints a line of it) has read all of it. Anything else than a pipe or a FIFO
(a terminal, a regular file, a socket) is never waited for: a write to it is
taken as read.
"""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import os
import select
import stat
import sys
import termios
from collections.abc import Callable, Iterator
from typing import Final, TextIO

import click

from qmgr.client import (
    ConnectionLost,
    Message,
    QueueError,
    QueueManager,
    Transaction,
    TransactionUsageError,
)

__all__ = [
    "FIRST_WAIT",
    "LONGEST_WAIT",
    "NotRead",
    "ShownReceiver",
    "poll_waits",
    "reader_gone",
    "wait_until_read",
]

#: Seconds of the first wait for a reader to take what was written, doubled
#: after each wait up to :data:`LONGEST_WAIT`.
FIRST_WAIT: Final = 0.001
#: The longest wait between two looks at what the reader has left unread: how
#: late, at worst, a slow reader's read is seen.
LONGEST_WAIT: Final = 0.1


def _pipe_fd(stream: TextIO | None) -> int | None:
    """The file descriptor of ``stream`` if it is a pipe or a FIFO, else None
    (closed, not a file, as a test's buffer, or a terminal or a file)."""
    try:
        fd = stream.fileno() if stream is not None else None
    except (AttributeError, OSError, ValueError):
        return None
    if fd is None:
        return None
    try:
        return fd if stat.S_ISFIFO(os.fstat(fd).st_mode) else None
    except OSError:
        return None


def reader_gone(stream: TextIO | None) -> bool:
    """True if ``stream`` is a pipe whose reader has gone: a write would fail."""
    fd = _pipe_fd(stream)
    if fd is None:
        return False
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR is reported whatever was asked for
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _unread(fd: int) -> int:
    """The bytes the pipe ``fd`` (either end) holds that its reader has not taken."""
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


def poll_waits() -> Iterator[float]:
    """The timeouts of the successive polls of :func:`wait_until_read`, in seconds."""
    wait = FIRST_WAIT
    while True:
        yield wait
        wait = min(wait * 2, LONGEST_WAIT)


def wait_until_read(stream: TextIO) -> bool:
    """Flush ``stream`` and, if it is a pipe, wait until its reader has taken
    every byte written to it (see the module's docstring).

    Returns:
        True once the pipe holds nothing unread (at once for anything but a
        pipe); False if the reader went away leaving bytes unread.

    Raises:
        OSError: the flush failed (the reader had gone already: ``EPIPE``).
    """
    stream.flush()
    fd = _pipe_fd(stream)
    if fd is None:
        return True
    poller = select.poll()
    poller.register(fd, 0)
    waits = poll_waits()
    while _unread(fd):
        if poller.poll(max(1, round(next(waits) * 1000))):  # the reader is gone
            return _unread(fd) == 0
    return True


class NotRead(BrokenPipeError):
    """The reader of standard output went away before it had read all of a
    message written to it (``EPIPE``: the command ends as after a failed write
    to a pipe nobody reads)."""


class ShownReceiver:
    """Receives a queue's messages one at a time for ``qmgr receive``, each taken
    only while its output can take it.

    Before each receive, a pipe whose reader has gone (``| head``) ends the run
    with nothing taken. Each message is written and, when the output is a pipe,
    waited for until the reader has taken all of it out of the pipe
    (:func:`wait_until_read`): a write only puts it in the pipe's
    buffer, where a reader that leaves would drop it. From a transactional
    queue each message is received in a transaction committed once the output
    took it; if the write fails (a full disk) or the reader leaves before
    reading it, the transaction aborts and the message is back in its place,
    with its abort count one higher, as after any aborted receive, and the run
    ends. A non-transactional queue cannot be received from in a transaction,
    nor give a message back: its message is received, then written; one the
    output could not take is named on stderr as lost.
    """

    def __init__(self, qm: QueueManager, queue: str) -> None:
        self._qm = qm
        self._queue = queue
        self._transactional = True  # until the queue says otherwise

    def receive(self, timeout: float, show: Callable[[Message], None]) -> Message | None:
        """The next message (waiting ``timeout`` s) once ``show`` wrote it; None if none came.

        Raises:
            QueueError: receiving failed.
            OSError: ``show`` failed, or the output is a pipe nobody reads.
        """
        if reader_gone(sys.stdout):
            raise BrokenPipeError(errno.EPIPE, "standard output is a pipe nobody reads")
        if self._transactional:
            tx = self._qm.begin()
            try:
                message = tx.receive(self._queue, timeout)
            except TransactionUsageError:  # a non-transactional queue
                tx.abort()
                self._transactional = False
            else:
                if message is None:
                    tx.abort()
                    return None
                try:
                    self._show(show, message)
                except BaseException:
                    with contextlib.suppress(QueueError):  # the write's error is the one to say
                        tx.abort()
                    raise
                self._commit(tx, message)
                return message
        message = self._qm.receive(self._queue, timeout)
        if message is not None:
            try:
                self._show(show, message)
            except OSError as exc:
                what = "was not read" if isinstance(exc, NotRead) else "could not be written out"
                note = (
                    f"note: message {message.id} was received from a non-transactional "
                    f"queue, which cannot take it back, and {what}: it is lost"
                )
                click.echo(note, err=True)
                raise
        return message

    @staticmethod
    def _show(show: Callable[[Message], None], message: Message) -> None:
        """Write ``message`` with ``show`` and wait until it was read out of a pipe.

        Raises:
            OSError: the write failed. NotRead: the reader of the pipe went
                away before it had read all of the message.
        """
        show(message)
        if not wait_until_read(sys.stdout):
            msg = "the reader of standard output left before it had read the message"
            raise NotRead(errno.EPIPE, msg)

    @staticmethod
    def _commit(tx: Transaction, message: Message) -> None:
        """Commit the receive of ``message``, shown already."""
        try:
            tx.commit()
        except QueueError as exc:
            gone = "may have been" if isinstance(exc, ConnectionLost) else "was not"
            note = f"note: message {message.id}, shown last, {gone} removed from the queue"
            click.echo(note, err=True)
            raise
