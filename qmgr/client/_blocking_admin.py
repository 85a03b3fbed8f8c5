"""The management calls of the blocking :class:`~qmgr.client.QueueManager`: its base class.

What the ``qmgr`` command's management subcommands call (``tx``, ``queue
set``/``move``, ``dl``, ``outgoing``, ``permissions``, ``trace``): global
transactions by xid, poison handling, distribution lists, outgoing queues,
permissions and trace. Each method runs one call of ``calls/`` on the
connection; ``_blocking`` holds the rest of the class (and why it is two
modules: ``_protocol``'s docstring).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._blocking_io import SocketConnection
from ._message import OutgoingInfo
from .calls import lists, outgoing, permissions, poison, routing, trace, two_phase
from .calls.lists import DistributionList
from .calls.poison import MoveResult, Seconds
from .calls.routing import Routing
from .calls.trace import TraceReport
from .calls.two_phase import Resolution, TransactionInfo

__all__ = ["QueueManagerAdmin"]


class QueueManagerAdmin:
    """Base of :class:`~qmgr.client.QueueManager`: its management calls."""

    _conn: SocketConnection

    # ------------------------------------------------------------------
    # Global transactions (prepared by Transaction.prepare)
    # ------------------------------------------------------------------

    def commit_prepared(self, xid: str) -> Resolution:
        """Commit the prepared transaction ``xid``, from any connection.

        Its sends become visible (in the order they were sent) and its
        receives final, at once; returns after the daemon has synced.
        Committing again is harmless while the daemon keeps the outcome
        (``transactions.outcome_retention``, 7 days by default).

        Returns:
            ``Resolution.COMMITTED``, or ``Resolution.ALREADY_COMMITTED`` if
            it had been committed before.

        Raises:
            TransactionNotFound: nothing is prepared under ``xid`` and no
                outcome is kept for it.
            TransactionUsageError: it is still open on its connection, not
                prepared (or its prepare is being written): try again later.
            TransactionAborted: it was aborted.
            InvalidArgument: ``xid`` is not a valid transaction id.
            NotSupported: the daemon is too old for global transactions.
        """
        return self._conn.run(two_phase.commit_prepared, xid)

    def abort_prepared(self, xid: str) -> Resolution:
        """Abort the prepared transaction ``xid``, from any connection.

        Its sends are discarded and the messages it received go back to
        their places.

        Returns:
            ``Resolution.ABORTED``, or ``Resolution.ALREADY_ABORTED`` if it
            had been aborted before.

        Raises:
            TransactionNotFound: nothing is prepared under ``xid`` and no
                outcome is kept for it.
            TransactionCommitted: it was committed; it stays committed.
            InvalidArgument, NotSupported: as :meth:`commit_prepared`.
        """
        return self._conn.run(two_phase.abort_prepared, xid)

    def commit_prepared_all(self, xids: Sequence[str]) -> list[Resolution]:
        """Commit the prepared transactions ``xids`` at once: all of them or none.

        One synced write commits them all (at most 10000), as a coordinator
        commits the parts of one global transaction. Returns one
        :class:`Resolution` per xid, in order. If one cannot be committed,
        none is, and the error's message names the xid. An empty ``xids``
        asks nothing of the daemon.

        Raises:
            LimitExceeded: their sends together are more than the daemon
                holds in memory at once (``limits.max_uncommitted_bytes``);
                nothing was committed: commit fewer at once.
            StoreFull: the store, at its limit, has no room for the write
                that moves their sends into their queues (about as many
                pages as they fill); nothing was committed, all stay
                prepared: make room, or commit fewer at once.
            the errors of :meth:`commit_prepared`.
        """
        return self._conn.run(two_phase.commit_prepared_all, xids)

    def abort_prepared_all(self, xids: Sequence[str]) -> list[Resolution]:
        """Abort the prepared transactions ``xids`` at once: all of them or none."""
        return self._conn.run(two_phase.abort_prepared_all, xids)

    def transactions(
        self, prefix: str = "", *, resolved: bool = False, limit: int = 1000
    ) -> list[TransactionInfo]:
        """The prepared transactions whose xid starts with ``prefix``, by xid.

        Args:
            prefix: only xids that start with it ("" for all).
            resolved: also list the outcomes the daemon keeps of resolved
                transactions (after the prepared ones).
            limit: at most this many prepared transactions, and at most
                this many outcomes (the daemon returns at most 10000 of
                each, and no more outcomes than fit in one reply).
        """
        return self._conn.run(two_phase.transactions, prefix, resolved, limit)

    # ------------------------------------------------------------------
    # Poison handling
    # ------------------------------------------------------------------

    def set_queue_properties(
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
        """Change a queue's poison handling or its quota (MSMQ's
        MQSetQueueProperties); the messages already in it are not changed.

        Any retry value given turns poison handling on; what is not given keeps
        its value, or WCF's default if poison handling was off (retry_count 5,
        retry_cycles 2, retry_delay 1800 s). ``poison_handling=False`` turns it
        off (aborts are still counted; nothing moves) and takes no value.
        Without them, poison handling stays as it is.

        ``quota`` replaces the queue's quota, ``no_quota=True`` removes it;
        without either it stays as it is. The quota judges the sends committed
        from then on: one below what the queue holds refuses new messages
        (``QuotaExceeded``) until enough are received, and bytes that
        prepared transactions reserved stay theirs. ``list_queues()`` shows
        the new quota at once. Poison settings and quota given together are
        changed in one write.

        Args:
            name: the queue (not a subqueue, journal or system queue).
            retry_count: aborted receives a message may have before it moves
                to ``NAME;retry``: it is received ``retry_count + 1`` times per cycle.
            retry_cycles: trips through ``NAME;retry`` before ``NAME;poison``.
            retry_delay: seconds (or a ``timedelta``) a message waits in ``;retry``.
            poison_handling: True turns it on with what is given, False off.
            quota: the most bytes of message bodies the queue (with its
                subqueues) may hold from now on; 0 takes only empty bodies.
            no_quota: True removes the quota (not with ``quota``).

        Raises:
            QueueNotFound, InvalidName, InvalidArgument; AccessDenied: not an
            application queue (or not allowed to set its properties);
            NotSupported: the daemon is too old (a quota needs protocol
            version 10, the rest version 5).
        """
        retry = (retry_count, retry_cycles, retry_delay)
        self._conn.run(poison.set_queue_properties, name, retry, poison_handling, quota, no_quota)

    def move(
        self, from_queue: str, to_queue: str, lookup_id: int | None = None, *, all: bool = False
    ) -> MoveResult:
        """Move messages between a queue and one of its subqueues (either way),
        or between two subqueues of one queue, as MSMQ's MQMoveMessage does;
        or dead letters out of ``system$;deadletter`` or ``system$;deadxact``
        into an application queue, or each back to the queue it was sent to.

        A moved message keeps its id, body and properties; it gets a new
        lookup id in its new queue, its abort count starts at 0 and its
        move count grows by one. Each message moves atomically: after any
        failure it is in exactly one of the two queues.

        A dead letter moved out becomes an ordinary message of its queue
        again: its class is normal (``MessageClass.NORMAL``) and its time to
        be received does not apply again. It goes only to a queue of its
        transactional kind (``system$;deadxact`` holds transactional
        messages): a queue of the other kind is refused. With ``to_queue=""``
        each message goes back to the queue it was sent to, if that is an
        application queue here (of its kind, that the caller may send to);
        one that has none stays in the dead-letter queue.

        Args:
            from_queue: where the messages are (``orders;poison``,
                ``system$;deadxact``).
            to_queue: where they go (``orders``); ``""`` from a dead-letter
                queue: each back to its own queue.
            lookup_id: the message to move; without it, the next one a
                receive would get (none there: ``count`` 0).
            all: every message in ``from_queue`` when the move begins
                (moved in steps; messages held by transactions stay, and,
                back to their queues, those that have none here).

        Raises:
            QueueNotFound: a queue, or the message named, is not there (or a
            transaction holds it), or the queue a dead letter was sent to no
            longer exists; InvalidArgument: the queues are none of those
            pairs, or of different transactional kinds, or the message
            named has no queue here to go back to; AccessDenied: the caller
            may not receive from ``from_queue`` or send to the queue the
            message would go to; QuotaExceeded: out of a dead-letter queue,
            no room in the target's quota; NotSupported: the daemon is too old.
        """
        return self._conn.run(poison.move, from_queue, to_queue, lookup_id, all)

    # ------------------------------------------------------------------
    # Distribution lists
    # ------------------------------------------------------------------

    def create_list(self, name: str, targets: Iterable[str] = ()) -> None:
        """Create the distribution list ``name`` with ``targets``: format names of
        single queues, here or on other queue managers (at most 1,000).

        Raises:
            QueueExists, InvalidName (a bad name, or a target that is a journal,
            system queue or list), QueueNotFound (a target names a queue here
            that does not exist), InvalidArgument (too many targets)
        """
        self._conn.run(lists.create_list, name, targets)

    def add_to_list(self, name: str, *targets: str) -> int:
        """Add targets to the list (those it has already are not added twice);
        returns how many targets it has now.

        Raises:
            QueueNotFound (no such list, or a target names a queue here that
            does not exist), InvalidName, InvalidArgument
        """
        return self._conn.run(lists.add_to_list, name, *targets)

    def remove_from_list(self, name: str, *targets: str) -> int:
        """Remove targets from the list; returns how many it has now.

        Raises:
            QueueNotFound (no such list), InvalidName
        """
        return self._conn.run(lists.remove_from_list, name, *targets)

    def delete_list(self, name: str) -> None:
        """Delete the list (messages already sent to it are not affected).

        Raises:
            QueueNotFound, InvalidName
        """
        self._conn.run(lists.delete_list, name)

    def lists(self) -> list[DistributionList]:
        """Every distribution list, by name."""
        return self._conn.run(lists.lists)

    def get_list(self, name: str) -> DistributionList:
        """The list ``name``.

        Raises:
            QueueNotFound, InvalidName
        """
        return self._conn.run(lists.get_list, name)

    # ------------------------------------------------------------------
    # Outgoing queues
    # ------------------------------------------------------------------

    def outgoing(self) -> list[OutgoingInfo]:
        """Every outgoing queue, by destination, with its state and counters.

        Raises:
            NotSupported: delivery to other queue managers is not running.
        """
        return self._conn.run(outgoing.outgoing)

    def routing(self, destination: str = "") -> Routing:
        """How the queue manager routes: whether it is a router, its aliases and
        ``[routes]``; with ``destination`` (a format name or ``HOST[:PORT]``),
        which next hop that destination takes, the entry that chose it, and the
        state of each of its next hops.

        Raises:
            InvalidName: ``destination`` is neither; NotSupported: the daemon
            is too old, or delivery to other queue managers is not running.
        """
        return self._conn.run(routing.routing, destination)

    def pause_outgoing(self, destination: str) -> OutgoingInfo:
        """Stop sending to ``destination`` (messages wait) until :meth:`resume_outgoing`.

        ``destination`` is the remote queue's format name, as
        :meth:`outgoing` lists it. Returns the queue afterwards. A pause
        lasts across restarts.

        Raises:
            QueueNotFound: no outgoing queue for it. InvalidName: not a
            remote queue's format name. NotSupported: peering is not running.
        """
        return self._conn.run(outgoing.pause_outgoing, destination)

    def resume_outgoing(self, destination: str) -> OutgoingInfo:
        """Send to ``destination`` again after :meth:`pause_outgoing`; return the queue."""
        return self._conn.run(outgoing.resume_outgoing, destination)

    def purge_outgoing(self, destination: str) -> int:
        """Delete every message waiting for ``destination``; return how many.

        None of them is sent again: one never sent is never delivered, one
        sent and not yet acknowledged may have been. The sequence goes on
        past them, so the destination accepts the ones sent later, in order.
        """
        return self._conn.run(outgoing.purge_outgoing, destination)

    # ------------------------------------------------------------------
    # Permissions
    # ------------------------------------------------------------------

    def permissions(self, queue: str) -> dict[str, list[str]]:
        """The access control list of ``queue``: entry -> its rights (words).

        Raises:
            QueueNotFound, AccessDenied (it needs get-properties on the queue)
        """
        return self._conn.run(permissions.permissions, queue)

    def grant(self, queue: str, entry: str, *rights: str) -> dict[str, list[str]]:
        """Give ``entry`` the ``rights`` on ``queue``; returns the list now.

        Raises:
            QueueNotFound, InvalidArgument (an unknown right), AccessDenied (it
            needs change-permissions on the queue)
        """
        return self._conn.run(permissions.grant, queue, entry, *rights)

    def revoke(self, queue: str, entry: str, *rights: str) -> dict[str, list[str]]:
        """Take ``rights`` (every right if none are named) from ``entry`` on ``queue``;
        returns the list now.

        Raises:
            QueueNotFound, InvalidArgument, AccessDenied
        """
        return self._conn.run(permissions.revoke, queue, entry, *rights)

    # ------------------------------------------------------------------
    # Trace
    # ------------------------------------------------------------------

    def trace(self, message_id: str) -> TraceReport:
        """What this queue manager knows about the message ``message_id``
        (``{source QM GUID}\\ordinal``, as ``send()`` returned it).

        The daemon searches its store (every queue, without recording anything
        beforehand), so a trace costs in proportion to the messages stored.

        Raises:
            InvalidArgument: not a message id; NotSupported: the daemon is too old.
        """
        return self._conn.run(trace.trace, message_id)
