"""The blocking client's pipelining against a scripted peer, with tiny socket buffers.

The peer answers every frame as soon as it reads it and does not read while
it writes, like the daemon. A client that wrote a large pipelined buffer
without reading the replies would fill both directions and hang.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from qmgr.client import InvalidName, QueueManager, Transaction
from wire import client_frames as cf


def _small_buffers(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)


class ScriptedPeer(threading.Thread):
    """Answers as the daemon does: Begin and a send in a transaction only if it fails
    (a send to 'bad' fails and dooms its transaction), everything else with Ok, and
    the Commit of a doomed transaction with an error."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.requests: list[cf.FrameValue] = []
        self.doomed: set[int] = set()

    def run(self) -> None:
        decoder = cf.ClientFrameDecoder()
        with self.sock:
            while data := self.sock.recv(4096):
                decoder.receive_data(data)
                while (frame := decoder.next_frame()) is not None:
                    self.requests.append(frame.value)
                    reply = self.answer(frame.value)
                    if reply is not None:
                        self.sock.sendall(cf.encode_frame(frame.request_id, reply))

    def answer(self, value: cf.FrameValue) -> cf.ServerReply | None:
        if isinstance(value, cf.Begin):
            return None
        if isinstance(value, cf.Send) and value.tx_id:
            if value.message.destination != "bad":
                return None
            self.doomed.add(value.tx_id)
            return cf.ErrorReply(code=int(cf.ErrorCode.INVALID_NAME), message="bad")
        if isinstance(value, cf.Commit) and value.tx_id in self.doomed:
            code = int(cf.ErrorCode.TRANSACTION_ABORTED)
            return cf.ErrorReply(code=code, message="a request in it failed")
        return cf.Ok()


@pytest.fixture
def peer() -> Iterator[tuple[QueueManager, ScriptedPeer]]:
    client, server = socket.socketpair()
    _small_buffers(client)
    _small_buffers(server)
    scripted = ScriptedPeer(server)
    scripted.start()
    qm = QueueManager(client, "scripted")
    try:
        yield qm, scripted
    finally:
        qm.close()
        scripted.join(10)
        assert not scripted.is_alive()


def test_large_pipelined_transaction_does_not_deadlock(
    peer: tuple[QueueManager, ScriptedPeer],
) -> None:
    qm, scripted = peer
    result: list[BaseException | None] = []

    def work() -> None:
        try:
            tx = Transaction(qm, 1)
            for i in range(20_000):
                tx.send("q", b"m" * 100, label=str(i))
            tx.commit()
            result.append(None)
        except BaseException as exc:
            result.append(exc)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the client deadlocked against its peer"
    assert result == [None]
    sends = [r for r in scripted.requests if isinstance(r, cf.Send)]
    assert len(sends) == 20_000
    assert [s.message.label for s in sends[:3]] == ["0", "1", "2"]
    assert isinstance(scripted.requests[-1], cf.Commit)
    assert not qm._proto.pipelined  # nothing is left waiting for a reply


def test_pipelined_error_is_kept_on_its_transaction(
    peer: tuple[QueueManager, ScriptedPeer],
) -> None:
    qm, scripted = peer
    good, bad = Transaction(qm, 1), Transaction(qm, 2)
    good.send("q", b"1")
    bad.send("bad", b"2")
    bad.send("q", b"3")
    good.send("q", b"4")
    good.commit()  # reads every reply: only `bad` failed
    with pytest.raises(InvalidName, match="cannot commit: bad"):
        bad.receive("q")
    with pytest.raises(InvalidName, match="aborted because a send in it failed"):
        bad.commit()
    assert isinstance(scripted.requests[-1], cf.Abort)  # it aborted instead of committing
    assert cf.Commit(tx_id=1) in scripted.requests
    assert 1 not in scripted.doomed


def test_a_send_that_fails_unseen_fails_the_commit(peer: tuple[QueueManager, ScriptedPeer]) -> None:
    qm, scripted = peer
    tx = Transaction(qm, 1)
    tx.send("q", b"1")
    tx.send("bad", b"2")  # its error is not read before commit() sends the Commit
    with pytest.raises(InvalidName, match="bad"):
        tx.commit()
    assert isinstance(scripted.requests[-1], cf.Commit)
    assert scripted.doomed == {1}  # the peer refused the commit: nothing was applied
