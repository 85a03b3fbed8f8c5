"""``qmgr receive`` takes a message only once its output took it (``qmgr/cli/receiving.py``):
a pipe's reader that leaves gets nothing taken that it did not read, with a real pipe
and a real queue manager; a terminal or a file is not waited for."""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import pytest
from helpers import DaemonProcess

from qmgr.cli import receiving
from qmgr.client import connect

from .kit import ok, run


@contextmanager
def piped() -> Iterator[tuple[int, TextIO]]:
    """A pipe: its read end (a file descriptor) and its write end as a text stream."""
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "w") as pipe:
            yield read_end, pipe
    finally:
        with contextlib.suppress(OSError):  # closed by the test already
            os.close(read_end)


def test_a_pipe_nobody_reads_is_seen_before_a_message_is_taken() -> None:
    with piped() as (read_end, pipe):
        assert not receiving.reader_gone(pipe)
        os.close(read_end)
        assert receiving.reader_gone(pipe)  # `| head` has exited


def test_anything_but_a_pipe_is_not_waited_for(tmp_path: Path) -> None:
    with (tmp_path / "out").open("w") as file:
        file.write("written\n")
        assert receiving.wait_until_read(file)  # flushed, and taken as read
        assert not receiving.reader_gone(file)
    assert (tmp_path / "out").read_text() == "written\n"
    assert not receiving.reader_gone(None)  # closed (`>&-`)


def test_what_the_reader_took_counts_as_read() -> None:
    """A reader that reads it all while the writer waits; one that read it all and
    left (``head`` reads a block, prints a line and exits); one that left with
    bytes unread."""
    with piped() as (read_end, pipe):
        pipe.write("a message\n")
        reader = threading.Thread(target=os.read, args=(read_end, 100))
        reader.start()
        assert receiving.wait_until_read(pipe)
        reader.join()
    with piped() as (read_end, pipe):
        pipe.write("a message\n")
        pipe.flush()
        assert os.read(read_end, 100) == b"a message\n"
        os.close(read_end)
        assert receiving.wait_until_read(pipe)
    with piped() as (read_end, pipe):
        pipe.write("a message\n")
        pipe.flush()
        assert os.read(read_end, 2) == b"a "
        threading.Thread(target=os.close, args=(read_end,)).start()
        assert not receiving.wait_until_read(pipe)


def test_the_waits_back_off_to_a_bound() -> None:
    waits = list(itertools.islice(receiving.poll_waits(), 12))
    assert waits[0] == receiving.FIRST_WAIT
    assert all(
        later == min(2 * earlier, receiving.LONGEST_WAIT)
        for earlier, later in itertools.pairwise(waits)
    )
    assert waits[-1] == receiving.LONGEST_WAIT


def _wait_for_bytes(read_end: int) -> None:
    """Return once the pipe holds bytes to read (none are read)."""
    poller = select.poll()
    poller.register(read_end, select.POLLIN)
    assert poller.poll(60_000), "nothing was written"


@pytest.mark.parametrize("transactional", [True, False], ids=["transactional", "plain"])
def test_a_reader_that_leaves_takes_only_what_it_read(
    shared_daemon: DaemonProcess, queue_name: str, transactional: bool
) -> None:
    """``qmgr receive q --count 3 | reader``: the reader reads the first message,
    then leaves while the second waits in the pipe. The first is taken; the second
    goes back to the queue (transactional: its abort count one higher) or, from a
    non-transactional queue, which cannot take it back, is named as lost; the
    third is not received at all."""
    ok(run(shared_daemon, "queue", "create", queue_name, *["--transactional"] * transactional))
    for body in ("one", "two", "three"):
        ok(run(shared_daemon, "send", queue_name, "--body", body))
    read_end, write_end = os.pipe()
    command = [
        sys.executable,
        *("-m", "qmgr", "--server", shared_daemon.address),
        *("receive", queue_name, "--count", "3"),
    ]
    with subprocess.Popen(command, stdout=write_end, stderr=subprocess.PIPE, text=True) as taker:
        os.close(write_end)
        try:
            _wait_for_bytes(read_end)
            # The first message, whole: the receive writes one at a time, in one write.
            assert os.read(read_end, 65536).decode().endswith("\none\n")
            _wait_for_bytes(read_end)  # the second, left unread
        finally:
            os.close(read_end)
        _, stderr = taker.communicate(timeout=60)
    assert taker.returncode == 1
    with connect(shared_daemon.address) as qm:
        left = qm.peek_range(queue_name)
    if transactional:
        assert [(m.body, m.abort_count) for m in left] == [(b"two", 1), (b"three", 0)]
        assert stderr == ""
    else:
        assert [m.body for m in left] == [b"three"]
        assert "and was not read: it is lost" in stderr
