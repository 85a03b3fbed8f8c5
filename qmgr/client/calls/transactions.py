"""Ending a transaction: ``prepare()``, ``commit()`` and ``abort()``.

The requests are packed as ``_transaction.TransactionState`` decides
(``ClientProtocol.prepare_request`` and ``end_request``), and their outcome
(the reply, or the error met sending it or waiting for it) is judged by
``_transaction.prepared`` and ``transaction_ended``. The clients write these
requests even from a cancelled scope: the waiter's ``ends`` is set.
"""

from __future__ import annotations

from wire import client as cf

from .._exceptions import QueueError
from .._protocol import ClientProtocol, Flow, W
from .._transaction import TransactionState, prepare_interrupted, prepared, transaction_ended

__all__ = ["end", "prepare"]


def prepare(proto: ClientProtocol[W], state: TransactionState) -> Flow[W, None]:
    """``prepare()``: raise what it raises (see ``_transaction.prepared``).

    Anything but a :class:`QueueError` met while waiting (an interrupt, a
    cancellation) leaves a transaction that may be prepared, and can only abort.
    """
    frame = bytearray()
    waiter = proto.prepare_request(frame, state)
    outcome: cf.ServerReply | QueueError
    try:
        outcome = yield waiter, frame
    except QueueError as exc:
        outcome = exc
    except BaseException:
        prepare_interrupted(state)
        raise
    prepared(state, outcome)


def end(proto: ClientProtocol[W], state: TransactionState, *, commit: bool) -> Flow[W, None]:
    """``commit()`` or ``abort()``: raise what they raise (see ``_transaction.transaction_ended``).

    Raises:
        TransactionNotFound: the transaction had already ended (nothing is sent).
    """
    state.end(commit=commit)
    outcome: cf.ServerReply | QueueError
    try:
        frame = bytearray()
        outcome = yield proto.end_request(frame, state), frame
    except QueueError as exc:
        outcome = exc
    transaction_ended(state, outcome)
