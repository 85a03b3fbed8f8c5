"""Queue names and format names, as MSMQ users write them."""

from __future__ import annotations

import pytest

from qmgr.core.errors import InvalidName
from qmgr.core.names import (
    LocalIdentity,
    canonical_host,
    display_format_name,
    parse_format_name,
    parse_queue_reference,
    split_host_port,
    validate_queue_name,
)

IDENTITY = LocalIdentity(host_names=frozenset({"localhost", "qm1"}), peer_port=1801)


@pytest.mark.parametrize(
    ("text", "queue"),
    [
        ("orders", "orders"),
        ("Orders", "orders"),
        (".\\private$\\orders", "orders"),
        ("private$\\Orders", "orders"),
        ("DIRECT=OS:.\\private$\\orders", "orders"),
        ("direct=os:QM1\\PRIVATE$\\orders", "orders"),
        ("DIRECT=OS:localhost:1801\\private$\\orders", "orders"),
        ("DIRECT=TCP:127.0.0.1\\private$\\orders", "orders"),
        ("system$;deadletter", "system$;deadletter"),
        (".\\SYSTEM$;DEADXACT", "system$;deadxact"),
        ("DIRECT=OS:.\\system$;deadletter", "system$;deadletter"),
        ("orders;journal", "orders;journal"),
        (".\\private$\\orders;JOURNAL", "orders;journal"),
    ],
)
def test_local_forms(text: str, queue: str) -> None:
    [element] = parse_format_name(text, IDENTITY).elements
    assert element.is_local
    assert element.queue == queue


@pytest.mark.parametrize(
    ("text", "protocol", "host", "port", "queue"),
    [
        ("DIRECT=TCP:10.1.2.3\\private$\\q", "TCP", "10.1.2.3", None, "q"),
        ("DIRECT=TCP:10.1.2.3:1900\\private$\\q", "TCP", "10.1.2.3", 1900, "q"),
        ("DIRECT=OS:Other-Host\\private$\\Q", "OS", "other-host", None, "q"),
        ("DIRECT=OS:other:2000\\private$\\q", "OS", "other", 2000, "q"),
        ("DIRECT=OS:x_y.Example.com.\\private$\\q", "OS", "x_y.example.com.", None, "q"),
        ("DIRECT=TCP:[::2]:1801\\private$\\q", "TCP", "::2", 1801, "q"),
        # Our own host on another port is another queue manager.
        ("DIRECT=OS:localhost:1901\\private$\\q", "OS", "localhost", 1901, "q"),
    ],
)
def test_remote_forms(text: str, protocol: str, host: str, port: int | None, queue: str) -> None:
    [element] = parse_format_name(text, IDENTITY).elements
    assert not element.is_local
    assert (element.protocol, element.host, element.port, element.queue) == (
        protocol,
        host,
        port,
        queue,
    )


def test_multiple_elements_are_split_and_deduplicated() -> None:
    name = parse_format_name(
        "a, DIRECT=OS:.\\private$\\A,b,DIRECT=TCP:10.0.0.1\\private$\\a", IDENTITY
    )
    assert name.is_multiple
    assert [(e.queue, e.is_local) for e in name.elements] == [
        ("a", True),
        ("b", True),
        ("a", False),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "a,",
        "bad\\name\\x",
        'quo"te',
        "plus+sign",
        "semi;colon",
        "x" * 125,
        "ends$",
        "tab\tname",
        "DIRECT=HTTP://host/msmq/private$/q",
        "DIRECT=TCP:not-an-ip\\private$\\q",
        "DIRECT=TCP:10.0.0.1:99999\\private$\\q",
        "DIRECT=OS:host\\q",
        "DIRECT=OS:\\private$\\q",
        "DIRECT=OS:bad host\\private$\\q",
        "DIRECT=OS:a..b\\private$\\q",
        "DIRECT=OS:-a\\private$\\q",
        f"DIRECT=OS:{'h' * 64}\\private$\\q",
        f"DIRECT=TCP:[fe80::1%{'x' * 300}]\\private$\\q",
        "PUBLIC=4d1c5b5e-0000-0000-0000-000000000000",
        "orders,system$;deadletter",
        "orders,q;journal",
        "otherhost\\private$\\q",
    ],
)
def test_invalid_names_are_refused_with_a_reason(text: str) -> None:
    with pytest.raises(InvalidName) as excinfo:
        parse_format_name(text, IDENTITY)
    assert str(excinfo.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "DIRECT=TCP:10.9.9.9\\orders",
            "'DIRECT=TCP:10.9.9.9\\orders': "
            "expected private$\\<queue> or system$;deadletter|deadxact|journal",
            id="no-private",
        ),
        pytest.param(
            "DIRECT=TCP:host.example\\private$\\orders",
            "'DIRECT=TCP:host.example\\private$\\orders': DIRECT=TCP: takes an IP address, "
            "not 'host.example' (use DIRECT=OS:)",
            id="tcp-host-name",
        ),
        pytest.param(
            "DIRECT=TCP:10.9.9.9\\private$\\orders;journal",
            "'DIRECT=TCP:10.9.9.9\\private$\\orders;journal': journal and dead-letter queues "
            "and subqueues on other hosts cannot be addressed",
            id="remote-journal",
        ),
        pytest.param(
            "DIRECT=TCP:10.9.9.9:x\\private$\\orders",
            "'DIRECT=TCP:10.9.9.9:x\\private$\\orders': 'x' is not a TCP port",
            id="bad-port",
        ),
        pytest.param(
            "tab\tname",
            "queue name 'tab\\tname' contains a control character",
            id="control-character-escaped",
        ),
    ],
)
def test_a_bad_format_name_is_quoted_as_it_was_typed(text: str, message: str) -> None:
    """The message quotes the name with its backslashes as typed (not doubled, as
    ``repr`` would), so that it can be copied back; a control character is escaped."""
    with pytest.raises(InvalidName) as excinfo:
        parse_format_name(text, IDENTITY)
    assert str(excinfo.value) == message
    assert "\\\\" not in message


def test_queue_name_limits() -> None:
    assert validate_queue_name("x" * 124) == "x" * 124
    with pytest.raises(InvalidName, match="124"):
        validate_queue_name("x" * 125)


def test_queue_reference_must_be_one_local_queue() -> None:
    assert parse_queue_reference("Orders", IDENTITY).queue == "orders"
    with pytest.raises(InvalidName, match="several"):
        parse_queue_reference("a,b", IDENTITY)
    with pytest.raises(InvalidName, match="another host"):
        parse_queue_reference("DIRECT=TCP:10.0.0.1\\private$\\a", IDENTITY)


def test_display_names() -> None:
    assert display_format_name("orders") == ".\\private$\\orders"
    assert display_format_name("system$;deadxact") == ".\\system$;deadxact"


def test_every_loopback_address_is_local_when_the_peer_listener_takes_every_address() -> None:
    everywhere = LocalIdentity(peer_port=1801, listens_everywhere=True)
    assert everywhere.is_local("127.0.0.2", 1801)
    assert everywhere.is_local("127.9.9.9", None)
    assert everywhere.is_local("[::1]", 1801)
    assert not everywhere.is_local("127.0.0.2", 1901)  # another queue manager's port
    assert not everywhere.is_local("10.0.0.5", 1801)
    # A listener on one address leaves the other loopback addresses to other queue managers.
    one_address = LocalIdentity(peer_port=1801, addresses=frozenset({"127.0.0.1"}))
    assert one_address.is_local("127.0.0.1", 1801)
    assert not one_address.is_local("127.0.0.2", 1801)


def test_an_address_or_name_is_local_in_any_of_its_spellings() -> None:
    """A router must not pass on to itself a message whose destination spells one of
    its addresses otherwise (it would stay stuck in its own outgoing queue)."""
    identity = LocalIdentity(
        peer_port=1801,
        host_names=frozenset({"localhost", "qm-b.site.example"}),
        addresses=frozenset({"FD55:0:0:0::2"}),
        aliases=frozenset({("2001:DB8::0:5", 11801)}),
    )
    for host in ("fd55::2", "[FD55::2]", "fd55:0:0:0:0:0:0:2", "[fd55:0::2]"):
        assert identity.is_local(host, 1801), host
    assert identity.is_local("[2001:db8::5]", 11801)
    assert identity.is_local("QM-B.site.example.", None)  # a fully qualified name's dot
    assert not identity.is_local("fd55::3", 1801)
    assert canonical_host("[FD55:0::2]") == "fd55::2"
    assert canonical_host("Host.Example.") == "host.example"


def test_aliases_are_this_queue_manager_under_the_names_others_reach_it_by() -> None:
    identity = LocalIdentity(
        peer_port=1901,
        aliases=frozenset(
            {("203.0.113.5", 11801), ("qm1.example.net", None), ("gw.example.net", 1801)}
        ),
    )
    mapped = parse_format_name("DIRECT=TCP:203.0.113.5:11801\\private$\\Orders", identity)
    assert [(e.queue, e.is_local) for e in mapped.elements] == [("orders", True)]
    assert identity.is_local("QM1.example.net", None)  # no port: ours
    assert identity.is_local("qm1.example.net", 1901)  # our peer port
    assert identity.is_local("gw.example.net", None)  # no port means 1801
    assert identity.is_local("gw.example.net", 1801)
    assert not identity.is_local("203.0.113.5", 1801)  # the alias names its port
    assert not identity.is_local("203.0.113.5", None)
    assert not identity.is_local("qm1.example.net", 1801)  # another port on that host
    assert not identity.is_local("gw.example.net", 1901)
    remote = parse_format_name("DIRECT=TCP:203.0.113.6:11801\\private$\\orders", identity)
    assert not remote.elements[0].is_local


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("DIRECT=TCP:fd55::2\\private$\\q", "fd55::2", None),
        # A bare IPv6 literal is the whole address (MSMQ's rule), not fd55::2 port 2800.
        ("DIRECT=TCP:fd55::2:2800\\private$\\q", "fd55::2:2800", None),
        ("DIRECT=TCP:[fd55::2]:28001\\private$\\q", "fd55::2", 28001),
        ("DIRECT=TCP:[fe80::1%eth0]:28001\\private$\\q", "fe80::1%eth0", 28001),
        ("DIRECT=OS:[fd55::2]\\private$\\q", "fd55::2", None),
    ],
)
def test_an_ipv6_address_takes_a_port_only_in_brackets(
    text: str, host: str, port: int | None
) -> None:
    [element] = parse_format_name(text, IDENTITY).elements
    assert (element.host, element.port) == (host, port)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "DIRECT=TCP:fd55::2:28001\\private$\\q",
            "'fd55::2:28001' is not an IPv6 address; write an IPv6 address with a port "
            "as [addr]:port ([fd55::2]:28001)",
        ),
        (
            "DIRECT=OS:fd55::2:28001\\private$\\q",
            "'fd55::2:28001' is not an IPv6 address; write an IPv6 address with a port "
            "as [addr]:port ([fd55::2]:28001)",
        ),
        (
            "DIRECT=TCP:fd55::zz\\private$\\q",
            "'fd55::zz' is not an IPv6 address; write an IPv6 address with a port as [addr]:port",
        ),
        (
            "DIRECT=TCP:[fd55::2:28001\\private$\\q",
            "unterminated [IPv6 address]; write an IPv6 address with a port as [addr]:port",
        ),
        (
            "DIRECT=TCP:[fd55::2]28001\\private$\\q",
            "unexpected '28001' after the address; write an IPv6 address with a port as "
            "[addr]:port",
        ),
        ("DIRECT=OS:[qm1]:1801\\private$\\q", "'qm1' is not an IPv6 address (brackets hold one)"),
    ],
)
def test_an_ipv6_address_and_a_port_without_brackets_are_refused_with_a_hint(
    text: str, reason: str
) -> None:
    with pytest.raises(InvalidName) as excinfo:
        parse_format_name(text, IDENTITY)
    # The format name as it is typed: its backslashes are not doubled.
    assert str(excinfo.value) == f"'{text}': {reason}"


def test_split_host_port_takes_port_zero_only_when_asked() -> None:
    assert split_host_port("[::1]:0", port_zero=True) == ("::1", 0)
    assert split_host_port(":0", port_zero=True) == ("", 0)
    with pytest.raises(InvalidName, match="'0' is not a TCP port"):
        split_host_port("[::1]:0")


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "0.0.0.0", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]", "[::]", "::", "::1"],
)
def test_every_spelling_of_an_own_address_is_local_under_either_protocol(host: str) -> None:
    """0.0.0.0 and :: connect to the loopback address, an IPv4-mapped address to the
    IPv4 address, and an address names a host after DIRECT=OS: as after DIRECT=TCP:."""
    own = LocalIdentity(peer_port=1801, addresses=frozenset({"127.0.0.1", "::1"}))
    written = f"[{host}]" if ":" in host and not host.startswith("[") else host
    for protocol in ("TCP", "OS"):
        text = f"DIRECT={protocol}:{written}\\private$\\q"
        assert parse_format_name(text, own).elements[0].is_local, text
    assert own.is_local(host, 1801)
    assert not own.is_local(host, 1901)  # another port: another queue manager


def test_the_unspecified_address_is_local_only_where_loopback_is() -> None:
    on_one_address = LocalIdentity(peer_port=1801, addresses=frozenset({"10.0.0.5"}))
    assert not on_one_address.is_local("0.0.0.0", 1801)  # it reaches 127.0.0.1, not us
    assert on_one_address.is_local("::ffff:10.0.0.5", 1801)
