"""The protocol layer of qmgr: sans-IO state machines for delivery between queue managers.

Layering rule: this package imports ``wire`` values and the standard library
only. It never opens a socket, reads a clock, touches the store, imports trio
or logs. Every input is a method call that carries the caller's ``now``
(seconds, any monotonic origin); every output is a list of plain action
values (bytes to send, packets to deliver, acknowledgements, close) or a
return value. Deadlines are announced with ``next_deadline()`` and honoured
by the caller calling ``timer(now)``. The trio adapters in ``qmgr.server``
own the sockets, the clock, the store and the logs, and are kept thin.

What lives here ([MS-MQQB], reference §14-§15):

* :class:`PeerSession` (``session``, ``session_values``, ``session_ledger``): one TCP session
  between two queue managers: the handshake, the u16 session counters, the
  peer's window, SessionAcks and their bitmap, and the session timers;
* the exactly-once in-order (EOD) sequences, sender and receiver side
  (``outgoing`` over ``outgoing_table``, ``incoming``; their shared values in
  ``sequence_values``);
* :class:`Receiver` (``receiver``, with ``history`` and ``return_paths``):
  what becomes of each packet a peer sends: acknowledgments for us or to
  pass on, and the exactly-once decision for messages (the sequences for
  transactional ones, the history of message ids for the others), with the
  OrderAcks; :class:`ReturnPaths`, the way back to each queue manager and
  which acknowledgments are passed on.

Each module opens with a theory of operation; the names below are the public
surface, each block maintained by its module's owner.
"""

from __future__ import annotations

# --- eod (begin) ---
# isort: off
from .incoming import IncomingSequences as IncomingSequences
from .incoming import OrderAckDue as OrderAckDue
from .incoming import StreamKey as StreamKey
from .incoming import StreamState as StreamState
from .incoming import stream_key as stream_key
from .outgoing import OutgoingSequence as OutgoingSequence
from .sequence_values import MAX_SEQUENCE_NUMBER as MAX_SEQUENCE_NUMBER
from .sequence_values import RESEND_INTERVALS as RESEND_INTERVALS
from .sequence_values import EntryKind as EntryKind
from .sequence_values import SequenceError as SequenceError
from .sequence_values import Transmission as Transmission

# isort: on
# --- eod (end) ---
# --- receiver (begin) ---
from .history import MessageHistory as MessageHistory
from .receiver import Accepted as Accepted
from .receiver import Dropped as Dropped
from .receiver import FinalAckArrived as FinalAckArrived
from .receiver import OrderAckArrived as OrderAckArrived
from .receiver import Receiver as Receiver
from .return_paths import ArrivalKind as ArrivalKind
from .return_paths import FinalAckToKeep as FinalAckToKeep
from .return_paths import PassOn as PassOn
from .return_paths import ReturnPaths as ReturnPaths

# --- receiver (end) ---
# --- session (begin) ---
from .session import PeerSession as PeerSession
from .session_values import Acked as Acked
from .session_values import Action as Action
from .session_values import Arrived as Arrived
from .session_values import Close as Close
from .session_values import Opened as Opened
from .session_values import Role as Role
from .session_values import Send as Send
from .session_values import SessionError as SessionError
from .session_values import SessionSettings as SessionSettings
from .session_values import SessionState as SessionState
# --- session (end) ---
