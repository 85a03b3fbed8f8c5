"""The blocking client's pipelining against a scripted peer, with tiny socket buffers.

The peer answers every frame as soon as it reads it and does not read while
it writes, like the daemon. A client that wrote a large pipelined buffer
without reading the replies would fill both directions and hang.
"""

from __future__ import annotations

import socket
import threading

import pytest

from qmgr.client import InvalidName, QueueManager, Transaction
from wire import client_frames as cf


def _small_buffers(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)


class ScriptedPeer(threading.Thread):
    """Answers Ok to every request, or an error to sends whose destination is 'bad'."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.requests: list[cf.FrameValue] = []

    def run(self) -> None:
        decoder = cf.ClientFrameDecoder()
        with self.sock:
            while data := self.sock.recv(4096):
                decoder.receive_data(data)
                while (frame := decoder.next_frame()) is not None:
                    self.requests.append(frame.value)
                    reply: cf.ServerReply = cf.Ok()
                    if isinstance(frame.value, cf.Send) and frame.value.destination == "bad":
                        reply = cf.ErrorReply(code=int(cf.ErrorCode.INVALID_NAME), message="bad")
                    self.sock.sendall(cf.encode_frame(frame.request_id, reply))


@pytest.fixture
def peer() -> tuple[QueueManager, ScriptedPeer]:
    client, server = socket.socketpair()
    _small_buffers(client)
    _small_buffers(server)
    scripted = ScriptedPeer(server)
    scripted.start()
    return QueueManager(client, "scripted"), scripted


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
    assert [s.label for s in sends[:3]] == ["0", "1", "2"]
    assert isinstance(scripted.requests[-1], cf.Commit)
    assert not qm._proto.pipelined  # every pipelined reply was read
    qm.close()


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
    qm.close()
