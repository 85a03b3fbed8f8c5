"""Checks of what the client SDK shows, shared by its tests against a scripted
daemon (``tests/client``) and those against a real one (``tests/integration``).

:func:`check_closed_by_daemon` and :func:`check_closed_by_daemon_async` check a
client (blocking or trio) whose connection the daemon closed with a notice.
"""

from __future__ import annotations

import pytest

from qmgr.client import AsyncQueueManager, ConnectionLost, QueueManager

#: The queue the checks call on: every queue manager has it.
ANY_QUEUE = "system$;deadletter"


def check_lost(error: ConnectionLost, address: str, reason: str) -> None:
    """``error`` is a plain ConnectionLost (no subclass) that says the daemon at
    ``address`` closed the connection, and gives the daemon's ``reason``."""
    assert type(error) is ConnectionLost
    assert error.message == (
        f"lost the connection to the queue manager at {address}: "
        f"the queue manager closed the connection: {reason}"
    )


def check_closed_by_daemon(qm: QueueManager, address: str, reason: str) -> None:
    """The call that finds the daemon's notice, and every later one, raises the
    ConnectionLost of :func:`check_lost`; the client is closed."""
    for _ in range(2):
        with pytest.raises(ConnectionLost) as caught:
            qm.peek(ANY_QUEUE)
        check_lost(caught.value, address, reason)
    assert qm.closed


async def check_closed_by_daemon_async(qm: AsyncQueueManager, address: str, reason: str) -> None:
    """:func:`check_closed_by_daemon` for the trio client: the same whether its
    reader saw the notice before the first call or while that call waited."""
    for _ in range(2):
        with pytest.raises(ConnectionLost) as caught:
            await qm.peek(ANY_QUEUE)
        check_lost(caught.value, address, reason)
    assert qm.closed
