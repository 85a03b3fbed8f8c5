"""Outgoing queues (``qmgr.core.outgoing``): a remote destination's names, and the
two bytes that begin each entry waiting there."""

from __future__ import annotations

import pytest

from qmgr.core.names import parse_format_name
from qmgr.core.outgoing import (
    EntryOrigin,
    RemoteDestination,
    decode_entry,
    entry_prefix,
)


@pytest.mark.parametrize(
    ("text", "outgoing", "direct", "endpoint"),
    [
        (
            "DIRECT=TCP:10.0.0.5\\private$\\Orders",
            "outgoing$;tcp:10.0.0.5:1801\\orders",
            "TCP:10.0.0.5\\private$\\orders",
            ("10.0.0.5", 1801),
        ),
        (
            "DIRECT=OS:Host.Example:1901\\private$\\q",
            "outgoing$;os:host.example:1901\\q",
            "OS:host.example:1901\\private$\\q",
            ("host.example", 1901),
        ),
        (
            "DIRECT=TCP:[::5]:1902\\private$\\q",
            "outgoing$;tcp:::5:1902\\q",
            "TCP:[::5]:1902\\private$\\q",
            ("::5", 1902),
        ),
    ],
)
def test_a_destination_and_its_names(
    text: str, outgoing: str, direct: str, endpoint: tuple[str, int]
) -> None:
    [address] = parse_format_name(text).elements
    destination = RemoteDestination.from_address(address)
    assert destination.outgoing_name == outgoing
    assert destination.direct_name == direct
    assert destination.display_name == "DIRECT=" + direct
    assert destination.endpoint == endpoint
    assert RemoteDestination.from_outgoing_name(outgoing) == destination


@pytest.mark.parametrize(
    "name",
    ["orders", "outgoing$;tcp:10.0.0.5:1801", "outgoing$;tcp:10.0.0.5:x\\q", "outgoing$;\\q"],
)
def test_other_names_are_not_outgoing_queues(name: str) -> None:
    with pytest.raises(ValueError, match="not an outgoing queue name"):
        RemoteDestination.from_outgoing_name(name)


@pytest.mark.parametrize(
    ("origin", "transactional", "recoverable", "read_back"),
    [
        (EntryOrigin.LOCAL, False, False, False),
        (EntryOrigin.LOCAL, False, True, True),
        (EntryOrigin.RELAYED, True, False, True),  # transactional is always recoverable
        (EntryOrigin.RELAYED, True, True, True),
    ],
)
def test_an_entry_says_where_it_came_from_and_how_it_goes(
    origin: EntryOrigin, transactional: bool, recoverable: bool, read_back: bool
) -> None:
    prefix = entry_prefix(origin, transactional=transactional, recoverable=recoverable)
    entry = decode_entry(prefix + b"data")
    assert (entry.origin, entry.transactional, entry.recoverable) == (
        origin,
        transactional,
        read_back,
    )
    assert bytes(entry.data) == b"data"


@pytest.mark.parametrize("payload", [b"", b"\x01", b"\x07\x00data"])
def test_anything_else_is_not_an_entry(payload: bytes) -> None:
    with pytest.raises(ValueError, match="not an outgoing-queue entry"):
        decode_entry(payload)
