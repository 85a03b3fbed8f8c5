"""What the blocking SDK's tests against a real daemon share (their fixtures,
``qm``, ``txq`` and ``plainq``, are in ``conftest.py``)."""

from __future__ import annotations

import threading

from qmgr.client import connect


def send_when(ready: threading.Event, address: str, queue: str, body: bytes) -> threading.Thread:
    """A thread that sends ``body`` to ``queue`` from a connection of its own as soon
    as ``ready`` is set (by a client about to wait for it).

    The waiting client sets ``ready`` just before its receive: its request goes
    out at once, while the send takes a connection and a round trip, so the
    receive is waiting when the message comes. (Should the send ever come first,
    the receive finds the message at once, which the tests accept too; test_sdk_trio
    checks the waking in an order it controls.)
    """

    def send() -> None:
        assert ready.wait(10), "the receiving side never got ready"
        with connect(address) as other:
            other.send(queue, body)

    thread = threading.Thread(target=send)
    thread.start()
    return thread
