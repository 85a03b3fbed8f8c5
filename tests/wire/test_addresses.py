"""The one ``HOST[:PORT]`` rule: IPv6 addresses with a port go in brackets."""

from __future__ import annotations

import re

import pytest

from wire.addresses import AddressError, endpoint_text, is_ipv6, split_host_port

BRACKETS = "write an IPv6 address with a port as [addr]:port"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:1801", ("127.0.0.1", 1801)),
        ("qm.example", ("qm.example", None)),
        ("[::1]:99", ("::1", 99)),
        ("[::1]", ("::1", None)),
        ("::1", ("::1", None)),
        ("fd55::2:2800", ("fd55::2:2800", None)),  # an address, not a port
        ("[fe80::1%eth0]:28002", ("fe80::1%eth0", 28002)),
        (":5", ("", 5)),
    ],
)
def test_split_host_port(text: str, expected: tuple[str, int | None]) -> None:
    assert split_host_port(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fd55::2:28001", f"'fd55::2:28001' is not an IPv6 address; {BRACKETS} ([fd55::2]:28001)"),
        (
            "tcp://127.0.0.1:1801",
            "'tcp://127.0.0.1:1801': write HOST:PORT without a scheme (tcp://)",
        ),
        ("http://qm:1803/", "'http://qm:1803/': write HOST:PORT without a scheme (http://)"),
        ("fd55::zz", f"'fd55::zz' is not an IPv6 address; {BRACKETS}"),
        ("[::1:28001", f"'[::1:28001': unterminated [IPv6 address]; {BRACKETS}"),
        ("[::1]28001", f"'[::1]28001': unexpected '28001' after the address; {BRACKETS}"),
        ("[qm1]:1801", "'[qm1]:1801': 'qm1' is not an IPv6 address (brackets hold one)"),
        ("h:0", "'h:0': '0' is not a TCP port"),
        ("h:x", "'h:x': 'x' is not a TCP port"),
        ("h:70000", "'h:70000': '70000' is not a TCP port"),
        # Digits to str.isdigit, but not ASCII ones: no port.
        ("h:\u00b2", "'h:\u00b2': '\u00b2' is not a TCP port"),
        (
            "h:\u0661\u0668\u0660\u0661",
            "'h:\u0661\u0668\u0660\u0661': '\u0661\u0668\u0660\u0661' is not a TCP port",
        ),
    ],
)
def test_a_bad_address_says_why(text: str, message: str) -> None:
    with pytest.raises(AddressError, match=f"^{re.escape(message)}$"):
        split_host_port(text)
    assert issubclass(AddressError, ValueError)


def test_errors_quote_the_text_given_and_port_zero_is_for_listeners() -> None:
    # The format name as it is typed: its backslash is not doubled.
    with pytest.raises(AddressError, match=re.escape("'DIRECT=TCP:h:x\\q': 'x' is not")):
        split_host_port("h:x", "DIRECT=TCP:h:x\\q")
    assert split_host_port("127.0.0.1:0", port_zero=True) == ("127.0.0.1", 0)


def test_is_ipv6_and_endpoint_text() -> None:
    assert is_ipv6("fe80::1%eth0")
    assert not is_ipv6("127.0.0.1")
    assert not is_ipv6("qm")
    assert endpoint_text("127.0.0.1", 1801) == "127.0.0.1:1801"
    assert endpoint_text("::1", 1801) == "[::1]:1801"
    assert endpoint_text("fe80::1%eth0", None) == "[fe80::1%eth0]"
