"""Every configuration key of ``qmgr serve``: the Config attribute it sets, its type, its check.

:data:`KEYS` maps ``(section, key)`` to a :class:`Key`; :mod:`qmgr.config`
reads a file or a ``--set`` through it, so a key is declared once, here,
with what its value must be (positive, a port, one of some words, ...), and
the message a wrong value gets. ``[routes]`` (:data:`ROUTES_SECTION`) takes
any key and is read apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from qmgr.core.names import is_host_name

__all__ = ["KEYS", "ROUTES_SECTION", "Key"]


@dataclass(frozen=True, slots=True)
class Key:
    """A key: the Config attribute it sets, the TOML type it takes, and its check
    (None, or the reason a value is wrong)."""

    attribute: str
    kind: type
    check: Callable[[Any], str | None] | None = None


def _positive(value: Any) -> str | None:
    return None if value > 0 else f"must be positive, not {value}"


def _port(value: Any) -> str | None:
    return None if 0 < value < 65536 else f"must be a port, 1 to 65535, not {value}"


def _not_negative(value: Any) -> str | None:
    return None if value >= 0 else f"must not be negative, not {value}"


def _delay_or_unset(value: Any) -> str | None:
    return None if value == -1 or value >= 0 else "must be -1 (unset) or a number of seconds >= 0"


def _float_list(value: Any) -> str | None:
    if not value or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < math.inf for v in value
    ):
        return "must be a non-empty list of positive, finite numbers of seconds"
    return None


def _string_list(value: Any) -> str | None:
    wrong = [v for v in value if not isinstance(v, str)]
    return f"must be a list of strings, not holding {wrong[0]!r}" if wrong else None


def _groups(value: Any) -> str | None:
    for group, members in value.items():
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            return f"must map each group to a list of names: {group} = {members!r}"
    return None


def _not_empty(value: Any) -> str | None:
    return None if value.strip() else "must not be empty"


#: The smallest store map: room for the catalog, the system queues and a few messages.
_MIN_MAP_SIZE = 1 << 20


#: The largest size a store key takes (64 TiB): a map must fit the address space.
_MAX_SIZE = 1 << 46


def _map_size(value: Any) -> str | None:
    if _MIN_MAP_SIZE <= value <= _MAX_SIZE:
        return None
    return f"must be {_MIN_MAP_SIZE} (1 MiB) to {_MAX_SIZE} bytes (64 TiB), not {value}"


def _reserve_size(value: Any) -> str | None:
    if 0 <= value <= _MAX_SIZE:
        return None
    return f"must be 0 to {_MAX_SIZE} bytes (64 TiB), not {value}"


#: peers.ack_timeout travels in EstablishConnection as a u32 of milliseconds.
_MAX_ACK_TIMEOUT = 0xFFFFFFFF // 1000


def _ack_timeout(value: Any) -> str | None:
    if 0 < value <= _MAX_ACK_TIMEOUT:
        return None
    return f"must be more than 0 and at most {_MAX_ACK_TIMEOUT} seconds, not {value}"


def _max_map_size(value: Any) -> str | None:
    return None if value == 0 else _map_size(value)


def _packet_size(value: Any) -> str | None:
    from wire import MAX_PACKET_SIZE

    if 1024 <= value <= MAX_PACKET_SIZE:
        return None
    return f"must be 1024..{MAX_PACKET_SIZE} bytes, not {value}"


def _qm_name(value: Any) -> str | None:
    # Peers reach back to it as DIRECT=OS:NAME (acknowledgments, responses), and
    # a send refuses a name there that is not a host name; "" is the host name.
    if not value or is_host_name(value):
        return None
    return (
        "must be a host name peers can write in DIRECT=OS:NAME (dot-separated labels "
        f"of letters, digits, '-' and '_', at most 253 characters), not {value!r}"
    )


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}, not {value!r}"

    return check


#: Every configuration key: ``(section, key)`` -> the Config attribute, its type and check.
KEYS: Final[dict[tuple[str, str], Key]] = {
    ("server", "name"): Key("name", str, _qm_name),
    ("server", "data_dir"): Key("data_dir", str, _not_empty),
    ("server", "listen"): Key("listen", str),
    ("server", "client_listen"): Key("client_listen", str),
    ("server", "aliases"): Key("aliases", list, _string_list),
    ("server", "max_connections"): Key("max_connections", int, _positive),
    ("server", "evictable_after"): Key("evictable_after", float, _not_negative),
    ("server", "hello_timeout"): Key("hello_timeout", float, _positive),
    ("server", "idle_timeout"): Key("idle_timeout", float, _positive),
    ("server", "frame_timeout"): Key("frame_timeout", float, _positive),
    ("server", "insecure"): Key("insecure", bool),
    ("server", "unix_socket"): Key("unix_socket", str),
    ("tls", "certificate"): Key("tls_certificate", str),
    ("tls", "key"): Key("tls_key", str),
    ("tls", "ca"): Key("tls_ca", str),
    ("tls", "min_version"): Key("tls_min_version", str, _one_of("1.2", "1.3")),
    ("tls", "clients"): Key("tls_clients", bool),
    ("tls", "peers"): Key("tls_peers", bool),
    ("tls", "http"): Key("tls_http", bool),
    ("tls", "pinned"): Key("tls_pinned", dict),
    ("tls", "relays"): Key("tls_relays", list, _string_list),
    ("auth", "required"): Key("auth_required", bool),
    ("auth", "failure_limit"): Key("auth_failure_limit", int, _positive),
    ("auth", "admins"): Key("auth_admins", list, _string_list),
    ("auth", "monitors"): Key("auth_monitors", list, _string_list),
    ("auth", "tokens"): Key("auth_tokens", dict),
    ("auth", "tokens_file"): Key("auth_tokens_file", str),
    ("auth", "groups"): Key("auth_groups", dict, _groups),
    ("auth", "default_acl"): Key("auth_default_acl", dict),
    ("auth", "failure_delay"): Key("auth_failure_delay", float, _not_negative),
    ("limits", "max_connections_per_address"): Key("max_connections_per_address", int, _positive),
    ("limits", "max_unauthenticated_per_address"): Key(
        "max_unauthenticated_per_address", int, _positive
    ),
    ("limits", "max_unauthenticated"): Key("max_unauthenticated", int, _positive),
    ("log", "format"): Key("log_format", str, _one_of("auto", "console", "json")),
    ("log", "level"): Key("log_level", str, _one_of("debug", "info", "warning", "error")),
    ("transactions", "idle_timeout"): Key("tx_idle_timeout", float, _positive),
    ("transactions", "max_operations"): Key("tx_max_operations", int, _positive),
    ("transactions", "max_bytes"): Key("tx_max_bytes", int, _positive),
    ("transactions", "max_prepared"): Key("tx_max_prepared", int, _positive),
    ("transactions", "outcome_retention"): Key("tx_outcome_retention", float, _positive),
    ("transactions", "xact_delay_receive_nack"): Key(
        "tx_xact_delay_receive_nack", float, _delay_or_unset
    ),
    ("limits", "max_transactions_per_connection"): Key(
        "max_transactions_per_connection", int, _positive
    ),
    ("limits", "max_waiting_receives_per_connection"): Key(
        "max_waiting_receives_per_connection", int, _positive
    ),
    ("limits", "max_uncommitted_bytes"): Key("max_uncommitted_bytes", int, _positive),
    ("limits", "max_frame_bytes"): Key("max_frame_bytes", int, _positive),
    ("limits", "max_reply_bytes"): Key("max_reply_bytes", int, _positive),
    ("store", "initial_map_size"): Key("initial_map_size", int, _map_size),
    ("store", "max_map_size"): Key("max_map_size", int, _max_map_size),
    ("store", "reserve_size"): Key("reserve_size", int, _reserve_size),
    ("store", "erase_step"): Key("erase_step", int, _positive),
    ("store", "writer_thread"): Key("writer_thread", bool),
    ("http", "listen"): Key("http_listen", str),
    ("http", "max_connections"): Key("http_max_connections", int, _positive),
    ("http", "keep_alive_timeout"): Key("http_keep_alive_timeout", float, _positive),
    ("http", "request_timeout"): Key("http_request_timeout", float, _positive),
    ("http", "session_timeout"): Key("http_session_timeout", float, _positive),
    ("http", "session_lifetime"): Key("http_session_lifetime", float, _positive),
    ("http", "allowed_hosts"): Key("http_allowed_hosts", list, _string_list),
    ("peers", "accept_from"): Key("peer_accept_from", list, _string_list),
    ("peers", "router"): Key("peer_router", bool),
    ("peers", "ping"): Key("peer_ping", bool),
    ("peers", "ping_port"): Key("peer_ping_port", int, _port),
    ("peers", "route_failover_after"): Key("peer_route_failover_after", float, _positive),
    ("peers", "outgoing_cleanup_after"): Key(
        "peer_outgoing_cleanup_after",
        float,
        lambda v: None if v == 0 or v >= 1 else f"must be 0 (never) or at least 1 s, not {v}",
    ),
    ("peers", "max_connections"): Key("peer_max_connections", int, _positive),
    ("peers", "max_unauthenticated"): Key("peer_max_unauthenticated", int, _positive),
    ("peers", "max_rejected_bytes"): Key("peer_max_rejected_bytes", int, _positive),
    ("peers", "max_unauthenticated_per_address"): Key(
        "peer_max_unauthenticated_per_address", int, _positive
    ),
    ("peers", "window"): Key(
        "peer_window", int, lambda v: None if 1 <= v <= 0xFFFF else "must be 1..65535"
    ),
    ("peers", "ack_timeout"): Key("peer_ack_timeout", float, _ack_timeout),
    ("peers", "recoverable_ack_timeout"): Key("peer_recoverable_ack_timeout", float, _positive),
    ("peers", "init_timeout"): Key("peer_init_timeout", float, _positive),
    ("peers", "idle_timeout"): Key("peer_idle_timeout", float, _positive),
    ("peers", "connect_timeout"): Key("peer_connect_timeout", float, _positive),
    ("peers", "retry_initial"): Key("peer_retry_initial", float, _positive),
    ("peers", "retry_max"): Key("peer_retry_max", float, _positive),
    ("peers", "max_packet_size"): Key("peer_max_packet_size", int, _packet_size),
    ("peers", "resend_intervals"): Key("peer_resend_intervals", list, _float_list),
    ("peers", "order_ack_delay"): Key("peer_order_ack_delay", float, _positive),
    ("peers", "order_ack_max_delay"): Key("peer_order_ack_max_delay", float, _positive),
    ("peers", "history_size"): Key("peer_history_size", int, _positive),
    ("peers", "history_seconds"): Key("peer_history_seconds", float, _positive),
}

#: ``[routes]`` takes any key: destinations (``HOST[:PORT]``, a CIDR network, ``*.suffix``
#: or ``*``) -> a next hop ``HOST[:PORT]`` (or ``direct``), or a list of them.
ROUTES_SECTION: Final = "routes"
