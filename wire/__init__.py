"""Wire formats of qmgr: pure data, no I/O.

Layering rule: this package imports nothing from ``qmgr`` or ``storage``, opens
no sockets, reads no clock and never sleeps. It holds construct layouts, typed
immutable values, ``parse_*``/``build_*`` functions and sans-IO frame decoders,
in two subpackages and a few modules both use:

* :mod:`wire.msmq`: the MSMQ session packets of [MS-MQMQ]/[MS-MQQB] that queue
  managers exchange on TCP port 1801 (``parse_packet``, ``build_packet``,
  ``FrameDecoder``); every name of its ``__all__`` is re-exported here;
* :mod:`wire.client`: qmgr's own client protocol, spoken between the daemon and
  the SDK (used as ``from wire import client as cf``);
* :class:`MessageProperties` (:mod:`wire.message_properties`), the one
  definition of a message's fields, and :mod:`wire.message_layout`, their
  bytes, which the client protocol carries and the store keeps;
* :mod:`wire.rights`, the queue access rights;
* :mod:`wire.addresses`, how a network address is written (``HOST[:PORT]``,
  ``[v6]:PORT``), for the daemon and the SDK alike;
* :mod:`wire.text_fields`, what is said of a text that cannot go in a text
  field (not valid Unicode, or too long), naming the field, and :func:`quoted`,
  how a message people read writes a name;
* the error tree both formats share (:mod:`wire.protocol_errors`:
  ``ProtocolError`` with ``RemoteProtocolError`` for malformed input and
  ``LocalProtocolError`` for values that cannot be built, ``TextFieldError``
  among them), the receive buffer of the stream decoders
  (:mod:`wire.receive_buffer`) and strict parsing with construct
  (:mod:`wire.strict_construct`).

Modules import what they use from the modules that define it, never from a
package's ``__init__``; the ``__init__`` files only re-export.
"""

from __future__ import annotations

from .message_layout import MAX_LABEL_CHARS as MAX_LABEL_CHARS
from .message_layout import MAX_MESSAGE_BODY as MAX_MESSAGE_BODY
from .message_layout import format_message_id as format_message_id
from .message_layout import parse_message_id as parse_message_id
from .message_properties import MessageProperties as MessageProperties
from .msmq import *  # noqa: F403  (every name of wire.msmq.__all__)
from .msmq import __all__ as _msmq_names
from .protocol_errors import LocalProtocolError as LocalProtocolError
from .protocol_errors import ProtocolError as ProtocolError
from .protocol_errors import RemoteProtocolError as RemoteProtocolError
from .text_fields import quoted as quoted

__all__ = [
    "LocalProtocolError",
    "MAX_LABEL_CHARS",
    "MAX_MESSAGE_BODY",
    "MessageProperties",
    "ProtocolError",
    "RemoteProtocolError",
    "format_message_id",
    "parse_message_id",
    "quoted",
    *_msmq_names,
]
