"""The management calls of :class:`~qmgr.client.AsyncQueueManager`: its base class.

The trio twin of ``_blocking_admin`` (global transactions by xid, poison
handling, distribution lists, outgoing queues, permissions and trace), for
symmetry with it: each method awaits one call of ``calls/`` on the
connection; ``_trio`` holds the rest of the class.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._message import OutgoingInfo
from ._trio_io import StreamConnection
from .calls import lists, outgoing, permissions, poison, routing, trace, two_phase
from .calls.lists import DistributionList
from .calls.poison import MoveResult, Seconds
from .calls.routing import Routing
from .calls.trace import TraceReport
from .calls.two_phase import Resolution, TransactionInfo

__all__ = ["AsyncQueueManagerAdmin"]


class AsyncQueueManagerAdmin:
    """Base of :class:`~qmgr.client.AsyncQueueManager`: its management calls."""

    _conn: StreamConnection

    # ------------------------------------------------------------------
    # Global transactions (prepared by AsyncTransaction.prepare)
    # ------------------------------------------------------------------

    async def commit_prepared(self, xid: str) -> Resolution:
        """Commit the prepared transaction ``xid``; see ``QueueManager.commit_prepared``."""
        return await self._conn.run(two_phase.commit_prepared, xid)

    async def abort_prepared(self, xid: str) -> Resolution:
        """Abort the prepared transaction ``xid``; see ``QueueManager.abort_prepared``."""
        return await self._conn.run(two_phase.abort_prepared, xid)

    async def commit_prepared_all(self, xids: Sequence[str]) -> list[Resolution]:
        """Commit prepared transactions, all or none; see ``QueueManager.commit_prepared_all``."""
        return await self._conn.run(two_phase.commit_prepared_all, xids)

    async def abort_prepared_all(self, xids: Sequence[str]) -> list[Resolution]:
        """Abort prepared transactions, all or none; see ``QueueManager.abort_prepared_all``."""
        return await self._conn.run(two_phase.abort_prepared_all, xids)

    async def transactions(
        self, prefix: str = "", *, resolved: bool = False, limit: int = 1000
    ) -> list[TransactionInfo]:
        """The prepared transactions (and outcomes); see ``QueueManager.transactions``."""
        return await self._conn.run(two_phase.transactions, prefix, resolved, limit)

    # ------------------------------------------------------------------
    # Poison handling
    # ------------------------------------------------------------------

    async def set_queue_properties(
        self,
        name: str,
        *,
        retry_count: int | None = None,
        retry_cycles: int | None = None,
        retry_delay: Seconds | None = None,
        poison_handling: bool | None = None,
        quota: int | None = None,
        no_quota: bool = False,
    ) -> None:
        """Change a queue's poison handling or its quota; see
        ``QueueManager.set_queue_properties``."""
        retry = (retry_count, retry_cycles, retry_delay)
        await self._conn.run(
            poison.set_queue_properties, name, retry, poison_handling, quota, no_quota
        )

    async def move(
        self, from_queue: str, to_queue: str, lookup_id: int | None = None, *, all: bool = False
    ) -> MoveResult:
        """Move messages between a queue and its subqueues, or out of a dead-letter
        queue (``to_queue=""``: each back to its queue); see ``QueueManager.move``."""
        return await self._conn.run(poison.move, from_queue, to_queue, lookup_id, all)

    # ------------------------------------------------------------------
    # Distribution lists
    # ------------------------------------------------------------------

    async def create_list(self, name: str, targets: Iterable[str] = ()) -> None:
        """Create a distribution list; see ``QueueManager.create_list``."""
        await self._conn.run(lists.create_list, name, targets)

    async def add_to_list(self, name: str, *targets: str) -> int:
        """Add targets; see ``QueueManager.add_to_list``."""
        return await self._conn.run(lists.add_to_list, name, *targets)

    async def remove_from_list(self, name: str, *targets: str) -> int:
        """Remove targets; see ``QueueManager.remove_from_list``."""
        return await self._conn.run(lists.remove_from_list, name, *targets)

    async def delete_list(self, name: str) -> None:
        """Delete a list; see ``QueueManager.delete_list``."""
        await self._conn.run(lists.delete_list, name)

    async def lists(self) -> list[DistributionList]:
        """Every distribution list, by name."""
        return await self._conn.run(lists.lists)

    async def get_list(self, name: str) -> DistributionList:
        """The list ``name``; see ``QueueManager.get_list``."""
        return await self._conn.run(lists.get_list, name)

    # ------------------------------------------------------------------
    # Outgoing queues
    # ------------------------------------------------------------------

    async def outgoing(self) -> list[OutgoingInfo]:
        """Every outgoing queue, by destination; see ``QueueManager.outgoing``."""
        return await self._conn.run(outgoing.outgoing)

    async def routing(self, destination: str = "") -> Routing:
        """Routes, aliases, and where ``destination`` goes; see ``QueueManager.routing``."""
        return await self._conn.run(routing.routing, destination)

    async def pause_outgoing(self, destination: str) -> OutgoingInfo:
        """Stop sending to ``destination``; see ``QueueManager.pause_outgoing``."""
        return await self._conn.run(outgoing.pause_outgoing, destination)

    async def resume_outgoing(self, destination: str) -> OutgoingInfo:
        """Send to ``destination`` again; see ``QueueManager.resume_outgoing``."""
        return await self._conn.run(outgoing.resume_outgoing, destination)

    async def purge_outgoing(self, destination: str) -> int:
        """Delete every message waiting for ``destination``; return how many."""
        return await self._conn.run(outgoing.purge_outgoing, destination)

    # ------------------------------------------------------------------
    # Permissions
    # ------------------------------------------------------------------

    async def permissions(self, queue: str) -> dict[str, list[str]]:
        """The access control list of ``queue``; see ``QueueManager.permissions``."""
        return await self._conn.run(permissions.permissions, queue)

    async def grant(self, queue: str, entry: str, *rights: str) -> dict[str, list[str]]:
        """Give ``entry`` rights; see ``QueueManager.grant``."""
        return await self._conn.run(permissions.grant, queue, entry, *rights)

    async def revoke(self, queue: str, entry: str, *rights: str) -> dict[str, list[str]]:
        """Take rights from ``entry``; see ``QueueManager.revoke``."""
        return await self._conn.run(permissions.revoke, queue, entry, *rights)

    # ------------------------------------------------------------------
    # Trace
    # ------------------------------------------------------------------

    async def trace(self, message_id: str) -> TraceReport:
        """What this queue manager knows about a message; see ``QueueManager.trace``."""
        return await self._conn.run(trace.trace, message_id)
