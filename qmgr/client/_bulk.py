"""Many plain sends in one call: ``send_bodies``, for writers that send a column of bodies.

``Transaction.send`` encodes each message's properties afresh. Messages
with nothing but a body (every property at its default) differ only in the
body, its length and the frame's request id, so :func:`send_bodies` encodes
the frame once, with an empty body, and then packs each message's frame
from that template: the same bytes ``send`` would have packed, pipelined
the same way (errors come from a later call on the transaction, or from
its prepare or commit).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable
from typing import Final

from wire import client as cf
from wire.message_layout import MESSAGE_FIXED_SIZE

from ._blocking import Transaction
from ._codec import append_send
from ._common import PIPELINE_FLUSH_BYTES
from ._protocol import MAX_REQUEST_ID

__all__ = ["send_bodies"]

_HEADER_SIZE: Final = 12
#: Transaction id and mode (9 bytes), then a message's fixed part up to its body length.
_MIDDLE: Final = 9 + MESSAGE_FIXED_SIZE - 4
_FRAME_HEAD = struct.Struct(f"<I4sI{_MIDDLE}sI")


def send_bodies(tx: Transaction, destination: str, bodies: Iterable[bytes]) -> int:
    """Send a message with each body to ``destination`` in ``tx``; return how many.

    The same as ``tx.send(destination, body)`` for each body, faster.

    Raises:
        MessageTooLarge: a body is over 4 MB (the bodies before it are sent).
        TransactionNotFound, InvalidArgument, ConnectionLost: as ``send``.
    """
    conn, proto, state = tx._conn, tx._proto, tx._state
    template = bytearray()
    append_send(template, 0, state.id, 0, destination, b"", {})
    kind = bytes(template[4:8])
    middle = bytes(template[_HEADER_SIZE : _HEADER_SIZE + _MIDDLE])
    name = bytes(template[_HEADER_SIZE + _MIDDLE + 4 :])
    fixed_size = len(template) - _HEADER_SIZE
    pack = _FRAME_HEAD.pack
    pipelined, request_ids = proto.pipelined, state.request_ids
    with conn.held():  # packed here, written by conn.write
        count = 0
        for body in bodies:
            if type(body) is not bytes or len(body) > cf.MAX_MESSAGE_BODY:
                tx.send(destination, body)  # raises what send raises, or sends as it takes it
                count += 1
                continue
            if state.ended or state._error is not None or state.prepared:
                state.check()
            if proto.broken is not None:
                proto.check_open()
            request_id = proto._next_id + 1
            if request_id > MAX_REQUEST_ID:
                request_id = 1
            out = proto.out
            out += pack(fixed_size + len(body), kind, request_id, middle, len(body))
            out += name
            out += body
            proto._next_id = request_id
            pipelined[request_id] = state
            request_ids.append(request_id)
            count += 1
            if len(out) > PIPELINE_FLUSH_BYTES or proto.flush_due(time.monotonic()):
                conn.write()
    return count
