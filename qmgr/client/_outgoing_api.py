"""Outgoing queues in the SDK: ``qm.outgoing()``, ``pause_outgoing()``,
``resume_outgoing()`` and ``purge_outgoing()`` (messages on their way to
other queue managers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wire import client_frames as cf

from . import _common as common
from . import _replies as replies

if TYPE_CHECKING:
    from ._message import OutgoingInfo

__all__ = ["AsyncQueueManagerOutgoing", "QueueManagerOutgoing"]


class QueueManagerOutgoing:
    """The outgoing-queue methods of ``QueueManager``."""

    if TYPE_CHECKING:

        def _call(self, value: cf.ClientRequest) -> cf.ServerReply: ...

    def outgoing(self) -> list[OutgoingInfo]:
        """Every outgoing queue, by destination, with its state and counters.

        Raises:
            NotSupported: delivery to other queue managers is not running.
        """
        return replies.outgoing_list(self._call(cf.ListOutgoing()))

    def pause_outgoing(self, destination: str) -> OutgoingInfo:
        """Stop sending to ``destination`` (messages wait) until :meth:`resume_outgoing`.

        ``destination`` is the remote queue's format name, as
        :meth:`outgoing` lists it. Returns the queue afterwards. A pause
        lasts across restarts.

        Raises:
            QueueNotFound: no outgoing queue for it. InvalidName: not a
            remote queue's format name. NotSupported: peering is not running.
        """
        return self._control_outgoing(common.OUTGOING_PAUSE, destination)[0]

    def resume_outgoing(self, destination: str) -> OutgoingInfo:
        """Send to ``destination`` again after :meth:`pause_outgoing`; return the queue."""
        return self._control_outgoing(common.OUTGOING_RESUME, destination)[0]

    def purge_outgoing(self, destination: str) -> int:
        """Delete every message waiting for ``destination``; return how many.

        Transactional messages purged are never delivered; the sequence
        goes on past them, so the destination accepts the ones sent later.
        """
        return self._control_outgoing(common.OUTGOING_PURGE, destination)[1]

    def _control_outgoing(self, action: int, destination: str) -> tuple[OutgoingInfo, int]:
        request = cf.ControlOutgoing(action=action, destination=destination)
        return replies.outgoing_changed(self._call(request))


class AsyncQueueManagerOutgoing:
    """The outgoing-queue methods of ``AsyncQueueManager`` (see ``QueueManager``'s)."""

    if TYPE_CHECKING:

        async def _request(self, value: cf.ClientRequest) -> cf.ServerReply: ...

    async def outgoing(self) -> list[OutgoingInfo]:
        """Every outgoing queue, by destination; see ``QueueManager.outgoing``."""
        return replies.outgoing_list(await self._request(cf.ListOutgoing()))

    async def pause_outgoing(self, destination: str) -> OutgoingInfo:
        """Stop sending to ``destination``; see ``QueueManager.pause_outgoing``."""
        return (await self._control_outgoing(common.OUTGOING_PAUSE, destination))[0]

    async def resume_outgoing(self, destination: str) -> OutgoingInfo:
        """Send to ``destination`` again; see ``QueueManager.resume_outgoing``."""
        return (await self._control_outgoing(common.OUTGOING_RESUME, destination))[0]

    async def purge_outgoing(self, destination: str) -> int:
        """Delete every message waiting for ``destination``; return how many."""
        return (await self._control_outgoing(common.OUTGOING_PURGE, destination))[1]

    async def _control_outgoing(self, action: int, destination: str) -> tuple[OutgoingInfo, int]:
        request = cf.ControlOutgoing(action=action, destination=destination)
        return replies.outgoing_changed(await self._request(request))
