"""Delivery between queue managers: the trio adapter around ``qmgr.protocol``'s machines.

Theory of operation
-------------------
The sans-IO machines decide (``qmgr.protocol``: the MQQB session, the
sender's sequences, the receiver of a peer's messages), the core says where
an arriving message goes (``qmgr.core.arrivals``); this package owns the
sockets, the clock, the store's writes and the logs, and carries out what
they decide. It is a package by concern, each module given what it needs
and none importing the hub that builds them:

=====================  ===================================================
module                 concern
=====================  ===================================================
``hub``                :class:`Peering`: builds the parts, runs them,
                       routes between them, answers status and control
``connection``         one TCP connection: a ``PeerSession``, its reader,
                       persister and writer
``persister``          what arrived over a connection, written in runs
                       before anything is acknowledged
``close_reasons``      why a connection ended, in words
``link``               the connection to one next hop: connect when there
                       is work, back off when it fails; which of its queues
                       may have a packet (``LinkQueues``)
``dial``               opening a connection to a hop (TCP, then TLS)
``accept``             the peer port: who may connect, unauthenticated
                       budgets, the TLS handshake
``identity``           which queue manager GUID each peer identity speaks for
``outgoing_queue``     one outgoing queue: its sequence machine and the
                       entries loaded from the store
``payloads``           the payloads an outgoing queue keeps in memory, to
                       a bound, and reads from the store past it
``outgoing``           every outgoing queue and link, the acknowledgments,
                       the resend timers, route failover and the cleanup
                       of idle queues and links (the sending side)
``forgets``            the writes that remove the entries that are done,
                       with their reports, and their retries
``incoming``           carries out the receiver's decisions, stores what
                       arrives, sends the OrderAcks (the receiving side)
``final_acks``         settles the FinalAcks that arrive about our messages;
                       keeps sessions up while FinalAcks are awaited
``relayed_acks``       a router's FinalAcks of other queue managers: stored
                       before they are acknowledged, then passed on or kept
``parts``              the daemon's parts, one value handed to each part
``ping``               the ping port: MSMQ pings on UDP answered
``aliases``            the start-up check that each ``server.aliases`` entry
                       reaches this queue manager
=====================  ===================================================

The background workers that serve peering, the FinalAck courier
(``qmgr.server.workers.final_ack_courier``) and the expiry of outgoing entries
(``qmgr.server.workers.outgoing_expiry``), live beside the daemon's other workers.

Durability before acknowledgment. An arrived message counts in a SessionAck
and in an OrderAck only after the write that stores it, with its stream's
new state, is persisted (``qmgr.protocol.receiver``). A sender forgets an
entry only after the acknowledgment that covers it, in one
``storage.ForgetOutgoing``; the store rolls the sequence in that same write
when the queue empties, and hands the new sequence back to the machine.

Acknowledgments travel back on the connection the message came in on: an
OrderAck is addressed to the source queue manager's ``order_queue$`` with
its GUID, and a router that sees one for another queue manager passes it
on along the connection that queue manager's messages arrived on.
"""

from __future__ import annotations

from .hub import Peering as Peering

__all__ = ["Peering"]
