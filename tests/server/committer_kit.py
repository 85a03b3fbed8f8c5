"""A committer running over a store, as the daemon runs it, for the server's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from qmgr.server.committer import Committer
from qmgr.server.writer import Writer
from storage import Store


@asynccontextmanager
async def running_committer(store: Store, *, thread: bool = False) -> AsyncIterator[Committer]:
    """A committer over ``store``, running until the block ends; its writer applies on a
    thread of its own (``thread``) or on the event loop, and is closed at the end."""
    writer = Writer(store, thread=thread)
    committer = Committer(store, writer)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(committer.run)
            yield committer
            nursery.cancel_scope.cancel()
    finally:
        writer.close()
