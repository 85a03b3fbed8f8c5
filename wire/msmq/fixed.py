"""The fixed-size construct layouts, compiled to ``struct.Struct`` at import.

A layout qualifies if it is a ``Struct`` made only of little-endian integer
fields, fixed-length ``Bytes`` and nested layouts of the same kind. Compiling
it gives one format string (``"<BBH4sII"`` for the BaseHeader) whose
``unpack_from`` and ``pack`` run in C: about a hundred times faster than
interpreting the layout, and exactly as strict about sizes, because the codec
checks that enough bytes are present before every read. The construct
definitions stay the single source of the offsets; this module only refuses
layouts it cannot translate faithfully.
"""

from __future__ import annotations

import operator
import struct
from typing import Any

from construct import Bytes, FormatField, Renamed, Struct

from ..protocol_errors import LocalProtocolError
from .layouts import (
    BASE_HEADER,
    CONNECTION_PARAMETERS_HEADER,
    DEBUG_HEADER_FIXED,
    ESTABLISH_CONNECTION_HEADER,
    INTERNAL_HEADER,
    MESSAGE_PROPERTIES_FIXED,
    MQF_ADDRESS_HEADER_FIXED,
    MQF_SIGNATURE_HEADER_FIXED,
    SECURITY_HEADER_FIXED,
    SESSION_HEADER,
    SOAP_SECTION_FIXED,
    TRANSACTION_HEADER_FIXED,
    USER_HEADER_FIXED,
)
from .layouts import (
    FINAL_ACK_BODY as FINAL_ACK_BODY_LAYOUT,
)
from .layouts import (
    ORDER_ACK_BODY as ORDER_ACK_BODY_LAYOUT,
)
from .layouts import (
    PING as PING_LAYOUT,
)

_RANGES = {
    "B": (0, 0xFF),
    "H": (0, 0xFFFF),
    "L": (0, 0xFFFFFFFF),
    "I": (0, 0xFFFFFFFF),
    "Q": (0, 0xFFFFFFFFFFFFFFFF),
}


class FixedLayout:
    """A compiled fixed-size layout: its ``struct.Struct``, size and flattened field names."""

    __slots__ = ("_values_of", "fields", "formats", "name", "pack", "size", "struct", "unpack_from")

    name: str
    struct: struct.Struct
    size: int
    fields: tuple[str, ...]
    formats: tuple[str, ...]

    def __init__(self, name: str, layout: Struct) -> None:
        fields: list[str] = []
        formats: list[str] = []
        _flatten(layout, "", fields, formats)
        compiled = struct.Struct("<" + "".join(formats))
        if compiled.size != layout.sizeof():
            msg = f"{name}: compiled size {compiled.size} != layout size {layout.sizeof()}"
            raise TypeError(msg)
        self.name = name
        self.struct = compiled
        self.size = compiled.size
        self.fields = tuple(fields)
        self.formats = tuple(formats)
        self.unpack_from = compiled.unpack_from
        self.pack = compiled.pack
        self._values_of = operator.attrgetter(*fields) if len(fields) > 1 else None

    def read(self, data: bytes, offset: int) -> dict[str, Any]:
        """The fields at ``offset`` by name, for a flat layout whose names are those
        of the typed value's attributes (the caller has checked that they fit)."""
        return dict(zip(self.fields, self.unpack_from(data, offset), strict=True))

    def build_from(self, value: object) -> bytes:
        """:meth:`build` from the attributes of ``value`` named like the fields (a flat layout)."""
        if self._values_of is None:
            return self.build(getattr(value, self.fields[0]))
        return self.build(*self._values_of(value))

    def build(self, *values: Any) -> bytes:
        """Pack ``values``; a value that does not fit raises :class:`LocalProtocolError`."""
        try:
            return self.pack(*values)
        except struct.error:
            message = self.describe_pack_error(values)
        raise LocalProtocolError(message, field=self.name)

    def describe_pack_error(self, values: tuple[Any, ...]) -> str:
        """Name the first value that does not fit its field, for an error message."""
        for field, fmt, value in zip(self.fields, self.formats, values, strict=True):
            if fmt.endswith("s"):
                size = int(fmt[:-1])
                if not isinstance(value, bytes) or len(value) != size:
                    return f"{field} must be {size} bytes, got {value!r:.40}"
                continue
            low, high = _RANGES[fmt]
            if not isinstance(value, int) or not low <= value <= high:
                return f"{field} must be an integer in {low}..{high:#x}, got {value!r:.40}"
        return "values do not fit the layout"


def _flatten(layout: Any, prefix: str, fields: list[str], formats: list[str]) -> None:
    if not isinstance(layout, Struct):
        msg = f"not a Struct: {layout!r}"
        raise TypeError(msg)
    for sub in layout.subcons:
        if not isinstance(sub, Renamed) or not sub.name:
            msg = f"unnamed field in fixed layout: {sub!r}"
            raise TypeError(msg)
        name = prefix + sub.name
        inner = sub.subcon
        if isinstance(inner, FormatField):
            order, code = inner.fmtstr[0], inner.fmtstr[1:]
            if order != "<" or code not in _RANGES:
                msg = f"{name}: only little-endian unsigned integers are supported"
                raise TypeError(msg)
            fields.append(name)
            formats.append(code)
        elif isinstance(inner, Bytes) and isinstance(inner.length, int):
            fields.append(name)
            formats.append(f"{inner.length}s")
        elif isinstance(inner, Struct):
            _flatten(inner, name + ".", fields, formats)
        else:
            msg = f"{name}: {type(inner).__name__} is not a fixed-size field"
            raise TypeError(msg)


BASE = FixedLayout("BaseHeader", BASE_HEADER)
INTERNAL = FixedLayout("InternalHeader", INTERNAL_HEADER)
USER = FixedLayout("UserHeader", USER_HEADER_FIXED)
TRANSACTION = FixedLayout("TransactionHeader", TRANSACTION_HEADER_FIXED)
SECURITY = FixedLayout("SecurityHeader", SECURITY_HEADER_FIXED)
PROPERTIES = FixedLayout("MessagePropertiesHeader", MESSAGE_PROPERTIES_FIXED)
SESSION = FixedLayout("SessionHeader", SESSION_HEADER)
DEBUG = FixedLayout("DebugHeader", DEBUG_HEADER_FIXED)
SOAP_SECTION = FixedLayout("SoapHeader", SOAP_SECTION_FIXED)
MQF_ADDRESS = FixedLayout("MQFAddressHeader", MQF_ADDRESS_HEADER_FIXED)
MQF_SIGNATURE = FixedLayout("MQFSignatureHeader", MQF_SIGNATURE_HEADER_FIXED)
ESTABLISH_CONNECTION = FixedLayout("EstablishConnectionHeader", ESTABLISH_CONNECTION_HEADER)
CONNECTION_PARAMETERS = FixedLayout("ConnectionParametersHeader", CONNECTION_PARAMETERS_HEADER)
ORDER_ACK_BODY = FixedLayout("OrderAck body", ORDER_ACK_BODY_LAYOUT)
FINAL_ACK_BODY = FixedLayout("FinalAck body", FINAL_ACK_BODY_LAYOUT)
PING = FixedLayout("Ping", PING_LAYOUT)

#: Small integers read inside variable-length parts (counts, format types).
U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
GUID_U32 = struct.Struct("<16sI")
