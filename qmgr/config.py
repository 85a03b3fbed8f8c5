"""Configuration: embedded defaults, then a TOML file, then command-line flags.

The defaults are ``qmgr/default_config.toml`` (the same text as the shipped
``config/qmgr.toml``). A file given with ``--config`` overrides them key by
key, and flags override both: the named flags (``--data-dir``, ...) and
``--set SECTION.KEY=VALUE`` for any key. Unknown keys and wrongly typed
values are errors naming the key, so that a typo in a production config is
reported instead of silently ignored. Every key is declared once, in
:data:`qmgr.config_keys.KEYS` (with the check of its value); the checks
that involve several keys (routes, listeners, TLS) are here.
"""

from __future__ import annotations

import ipaddress
import math
import os
import socket
import tomllib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, Final

from qmgr.core import names
from qmgr.core.errors import InvalidName
from qmgr.core.names import LocalIdentity
from qmgr.core.routes import RouteError, RouteTable, endpoint_text, split_host_port
from qmgr.host_addresses import interface_addresses

from .config_keys import KEYS, ROUTES_SECTION


class ConfigError(Exception):
    """The configuration is invalid; the message says which key and why.

    ``log_format`` is ``log.format`` as the configuration file (or a
    ``--set`` read before the error) set it, when the error was found after
    the file was read (None otherwise): what ``qmgr serve`` reports the
    error in when ``--log-format`` is not given.
    """

    log_format: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Address:
    """A ``HOST:PORT`` listening address."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str, *, what: str) -> Address:
        """Parse ``HOST:PORT``: an IPv6 address in brackets, ``[::1]:1801``
        (port 0: any free port; no host: ``0.0.0.0``).

        Raises:
            ConfigError: no port (an IPv6 address without brackets has none), or
                text that does not parse (the message names ``what``).
        """
        text = text.strip()
        try:
            host, port = names.split_host_port(text, port_zero=True)
        except InvalidName as exc:
            msg = f"{what}: {exc}"
            raise ConfigError(msg) from None
        if port is None:
            hint = f" (write an IPv6 address with a port as [{host}]:PORT)" if ":" in host else ""
            msg = f"{what}: expected HOST:PORT, got {text!r}{hint}"
            raise ConfigError(msg)
        return cls(host=host or "0.0.0.0", port=port)

    def __str__(self) -> str:
        return endpoint_text(self.host, self.port)


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """Everything ``qmgr serve`` needs (see ``config/qmgr.toml`` for what each means)."""

    name: str
    data_dir: Path
    listen: Address
    client_listen: Address
    #: The HTTP listener (``/healthz``, ``/metrics``); None: off.
    http_listen: Address | None
    http_max_connections: int
    http_keep_alive_timeout: float
    http_request_timeout: float
    #: The console's sessions: seconds idle, and seconds in all.
    http_session_timeout: float
    http_session_lifetime: float
    #: Host names (besides IP addresses, localhost, server.name and the listener's
    #: own host) a browser may use to reach the plain-HTTP listener (lower case).
    http_allowed_hosts: frozenset[str]
    #: Other ``(host, port)`` this queue manager is reached at (port None: its peer port).
    aliases: tuple[tuple[str, int | None], ...]
    max_connections: int
    evictable_after: float
    hello_timeout: float
    idle_timeout: float
    frame_timeout: float
    log_format: str
    log_level: str
    tx_idle_timeout: float
    tx_max_operations: int
    tx_max_bytes: int
    tx_max_prepared: int
    tx_outcome_retention: float
    tx_xact_delay_receive_nack: float
    max_transactions_per_connection: int
    max_waiting_receives_per_connection: int
    max_uncommitted_bytes: int
    max_frame_bytes: int
    max_reply_bytes: int
    initial_map_size: int
    max_map_size: int | None
    reserve_size: int
    erase_step: int
    writer_thread: bool
    peer_accept_from: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    peer_max_connections: int
    peer_max_unauthenticated: int
    peer_max_rejected_bytes: int
    peer_max_unauthenticated_per_address: int
    peer_window: int
    peer_ack_timeout: float
    peer_recoverable_ack_timeout: float
    peer_init_timeout: float
    peer_idle_timeout: float
    peer_connect_timeout: float
    peer_retry_initial: float
    peer_retry_max: float
    peer_max_packet_size: int
    peer_resend_intervals: tuple[float, ...]
    peer_order_ack_delay: float
    peer_order_ack_max_delay: float
    peer_history_size: int
    peer_history_seconds: float
    peer_router: bool
    #: Answer MSMQ pings on UDP ``peer_ping_port`` (of the peer listener's host).
    peer_ping: bool
    peer_ping_port: int
    peer_route_failover_after: float
    #: An empty outgoing queue is removed after this many seconds without traffic (0: never).
    peer_outgoing_cleanup_after: float
    routes: RouteTable
    insecure: bool
    unix_socket: Path | None
    tls_certificate: Path | None
    tls_key: Path | None
    tls_ca: Path | None
    tls_min_version: str
    tls_clients: bool
    tls_peers: bool
    tls_http: bool
    tls_pinned: dict[str, uuid.UUID]
    tls_relays: frozenset[str]
    auth_required: bool
    auth_failure_limit: int
    auth_admins: frozenset[str]
    auth_monitors: frozenset[str]
    auth_tokens: dict[str, str]
    auth_tokens_file: Path | None
    auth_groups: dict[str, frozenset[str]]
    auth_default_acl: dict[str, list[str]]
    auth_failure_delay: float
    max_connections_per_address: int
    max_unauthenticated_per_address: int
    max_unauthenticated: int

    @property
    def tls_on_clients(self) -> bool:
        """True when the client port speaks TLS."""
        return self.tls_certificate is not None and self.tls_clients

    @property
    def tls_on_peers(self) -> bool:
        """True when the peer port and connections to peers speak mutual TLS."""
        return self.tls_certificate is not None and self.tls_peers

    @property
    def tls_on_http(self) -> bool:
        """True when the HTTP listener speaks TLS (HTTPS)."""
        return self.tls_certificate is not None and self.tls_http


def default_config_text() -> str:
    """The embedded default configuration file."""
    return resources.files("qmgr").joinpath("default_config.toml").read_text(encoding="utf-8")


def load_config(
    path: Path | None = None, *, settings: Iterable[str] = (), **overrides: Any
) -> Config:
    """Build the configuration.

    Args:
        path: a TOML file overriding the embedded defaults, or None.
        settings: ``SECTION.KEY=VALUE`` overrides (the value in TOML syntax;
            a bare word is taken as a string).
        overrides: named flag values (None means "not given"): name,
            data_dir, listen, client_listen, http_listen ("" turns it off),
            log_format, log_level.

    Raises:
        ConfigError: unreadable file, unknown key, wrong type or bad value.
    """
    values = _parse(default_config_text(), "embedded defaults")
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            msg = f"cannot read config file {path}: {exc.strerror}"
            raise ConfigError(msg) from exc
        from_file = _parse(text, str(path))
        values.update(from_file)
        log_format = from_file.get(("log", "format"))
    else:
        log_format = None
    try:
        for setting in settings:
            setting_values = _parse_setting(setting)
            values.update(setting_values)
            log_format = setting_values.get(("log", "format"), log_format)
        routes = {
            key: value for (section, key), value in values.items() if section == ROUTES_SECTION
        }
        attributes = {
            KEYS[key].attribute: value for key, value in values.items() if key[0] != ROUTES_SECTION
        }
        attributes["routes"] = routes
        for key, value in overrides.items():
            if value is not None:
                attributes[key] = str(value) if isinstance(value, Path) else value
        return _build(attributes)
    except ConfigError as exc:
        exc.log_format = log_format if isinstance(log_format, str) else None
        raise


def _build(attributes: dict[str, Any]) -> Config:
    for (section, key), spec in KEYS.items():
        value = attributes[spec.attribute]
        if spec.kind is float and isinstance(value, float) and not math.isfinite(value):
            msg = f"{section}.{key} must be a finite number, not {value}"
            raise ConfigError(msg)
        check = spec.check
        if check is not None:
            problem = check(value)
            if problem is not None:
                msg = f"{section}.{key} {problem}"
                raise ConfigError(msg)
    fields = dict(attributes)
    fields["name"] = fields["name"] or socket.gethostname()
    fields["data_dir"] = _absolute("server.data_dir", fields["data_dir"])
    fields["listen"] = Address.parse(fields["listen"], what="server.listen")
    fields["client_listen"] = Address.parse(fields["client_listen"], what="server.client_listen")
    fields["http_listen"] = (
        Address.parse(fields["http_listen"], what="http.listen") if fields["http_listen"] else None
    )
    fields["max_map_size"] = fields["max_map_size"] or None
    fields["peer_accept_from"] = _networks(fields["peer_accept_from"])
    fields["aliases"] = _aliases(fields["aliases"])
    fields["peer_resend_intervals"] = tuple(float(v) for v in fields["peer_resend_intervals"])
    fields["routes"] = _routes(fields.pop("routes", {}))
    for name in ("tls_certificate", "tls_key", "tls_ca"):
        key = f"tls.{name.removeprefix('tls_')}"
        fields[name] = _absolute(key, fields[name]) if fields[name] else None
    fields["tls_pinned"] = _pinned(fields["tls_pinned"])
    fields["tls_relays"] = frozenset(str(identity) for identity in fields["tls_relays"])
    fields["auth_admins"] = _entries("auth.admins", fields["auth_admins"])
    fields["http_allowed_hosts"] = frozenset(str(h).lower() for h in fields["http_allowed_hosts"])
    fields["auth_monitors"] = _entries("auth.monitors", fields["auth_monitors"])
    socket_path = fields["unix_socket"]
    fields["unix_socket"] = _socket_path(socket_path) if socket_path else None
    tokens_file = fields["auth_tokens_file"]
    fields["auth_tokens_file"] = _absolute("auth.tokens_file", tokens_file) if tokens_file else None
    fields["auth_tokens"] = _tokens(fields["auth_tokens"])
    fields["auth_default_acl"] = _default_acl(fields["auth_default_acl"])
    fields["auth_groups"] = {
        str(group): frozenset(str(member) for member in members)
        for group, members in fields["auth_groups"].items()
    }
    config = Config(**fields)
    if config.peer_retry_max < config.peer_retry_initial:
        msg = "peers.retry_max must not be below peers.retry_initial"
        raise ConfigError(msg)
    if config.peer_order_ack_max_delay < config.peer_order_ack_delay:
        msg = "peers.order_ack_max_delay must not be below peers.order_ack_delay"
        raise ConfigError(msg)
    _check_listeners(config)
    _check_tls(config)
    _check_routes(config)
    if config.max_map_size is not None and config.max_map_size < config.initial_map_size:
        config = replace(config, initial_map_size=config.max_map_size)
    return config


def _absolute(key: str, text: str) -> Path:
    """The path setting ``key``, ``~`` expanded, a relative path taken from the
    working directory (every path setting's rule), made absolute for messages."""
    try:
        return Path(text).expanduser().absolute()
    except OSError as exc:  # os.getcwd(): the working directory was removed
        msg = f"{key} {text!r} is relative and the working directory is gone ({exc.strerror})"
        raise ConfigError(msg) from None


#: The longest path a Unix-domain socket binds to (``sun_path`` less its NUL).
_MAX_SOCKET_PATH = 107


def _socket_path(text: str) -> Path:
    """``server.unix_socket`` as every path setting, but kept relative where its
    absolute form would pass what a Unix-domain socket can bind to."""
    path = _absolute("server.unix_socket", text)
    if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
        return Path(text).expanduser()
    return path


def _parse(text: str, origin: str) -> dict[tuple[str, str], Any]:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        again = "('auth', 'tokens') twice" in str(exc)
        msg = f"{origin}: {exc}" + (f" ({_TOKEN_LINES})" if again else "")
        raise ConfigError(msg) from exc
    sections = {section for section, _ in KEYS} | {ROUTES_SECTION}
    result: dict[tuple[str, str], Any] = {}
    for section, items in raw.items():
        if section not in sections or not isinstance(items, dict):
            msg = f"{origin}: unknown section [{section}]"
            raise ConfigError(msg)
        for key, value in items.items():
            result[(section, key)] = _typed(section, key, value, origin)
    return result


def _parse_setting(setting: str) -> dict[tuple[str, str], Any]:
    name, sep, text = setting.partition("=")
    section, dot, key = name.strip().partition(".")
    key = key.strip().strip('"')
    if not sep or not dot:
        msg = f"--set {setting!r}: expected SECTION.KEY=VALUE"
        raise ConfigError(msg)
    spec = KEYS.get((section.strip(), key.strip()))
    if spec is not None and spec.kind is str and not text.strip().startswith(('"', "'")):
        value: Any = text.strip()  # a text setting takes the word as it is: name=2024
    else:
        try:
            value = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = text.strip()
    return {(section.strip(), key.strip()): _typed(section.strip(), key.strip(), value, "--set")}


#: Where the lines ``qmgr auth token NAME`` prints go.
_TOKEN_LINES: Final = (
    'a token\'s line, NAME = "sha256:...", goes in the one [auth.tokens] table, '
    "which the shipped qmgr.toml ends with"
)


def _typed(section: str, key: str, value: Any, origin: str) -> Any:
    misplaced = section == ROUTES_SECTION or (section, key) not in KEYS
    if misplaced and isinstance(value, str) and value.startswith("sha256:"):
        msg = f"{origin}: {section}.{key} = {value[:16]!r}...: {_TOKEN_LINES}"
        raise ConfigError(msg)
    if section == ROUTES_SECTION:
        hops = value if isinstance(value, list) else [value]
        if not hops or not all(isinstance(hop, str) for hop in hops):
            msg = (
                f'{origin}: routes."{key}" must be a next hop "HOST:PORT" (or "direct"), '
                f"or a list of them in order of preference, not {value!r}"
            )
            raise ConfigError(msg)
        return value
    spec = KEYS.get((section, key))
    if spec is None:
        msg = f"{origin}: unknown key {section}.{key}"
        raise ConfigError(msg)
    expected = spec.kind
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    wrong_bool = isinstance(value, bool) and expected is not bool
    if not isinstance(value, expected) or wrong_bool:
        msg = f"{origin}: {section}.{key} must be {expected.__name__}, not {value!r}"
        raise ConfigError(msg)
    return value


def _networks(values: list[Any]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(str(value), strict=False))
        except ValueError:
            msg = f"peers.accept_from: {value!r} is not an address or CIDR network"
            raise ConfigError(msg) from None
    return tuple(networks)


def parse_host_port(text: str, *, what: str, default_port: int = 1801) -> tuple[str, int]:
    """``HOST[:PORT]`` (``[v6]:PORT`` for IPv6) as a lower-case host and a port."""
    host, port = _split_host_port(text, what=what)
    return host, default_port if port is None else port


def _split_host_port(text: str, *, what: str) -> tuple[str, int | None]:
    """``HOST[:PORT]`` as a lower-case host and its port (None: none written)."""
    try:
        return split_host_port(text)
    except RouteError as exc:
        msg = f"{what}: {exc}"
        raise ConfigError(msg) from None


#: Listening addresses that take every address of the host.
_WILDCARDS: Final = ("", "0.0.0.0", "::")


def local_identity(config: Config) -> LocalIdentity:
    """The names and addresses that are this queue manager's own: its listening
    address (when it listens on all, every address of the host's interfaces at
    start, of that family, and every loopback address, with its port), its host
    and queue-manager names, and ``server.aliases``."""
    host = config.listen.host
    names = {"localhost", socket.gethostname(), config.name}
    addresses = {"127.0.0.1", "::1"}
    if host not in _WILDCARDS:
        # A listen host name is how this queue manager names itself to peers too
        # (its admin and response queues): it is one of its names.
        (addresses if _is_ip_address(host) else names).add(host)
    else:
        # 0.0.0.0 takes IPv4 only; "::" (and "") both families on Linux.
        addresses |= interface_addresses(ipv6=host != "0.0.0.0")
    return LocalIdentity(
        host_names=frozenset(names),
        addresses=frozenset(addresses),
        peer_port=config.listen.port,
        listens_everywhere=host in _WILDCARDS,
        aliases=frozenset(config.aliases),
    )


def _is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _check_routes(config: Config) -> None:
    """A route may neither lead to this queue manager nor send its own messages away."""
    identity = local_identity(config)

    # As TCP: addresses, names and aliases alike (what OS matches is a part of it).
    ours = identity.is_local
    for route in config.routes:
        key = f'routes."{route.key}"'
        if isinstance(route.target, tuple) and ours(*route.target):
            msg = (
                f"{key}: the destination is this queue manager (server.listen, its names "
                "or server.aliases): a route would send its own messages away"
            )
            raise ConfigError(msg)
        for hop in route.hops:
            if hop is not None and ours(*hop):
                msg = (
                    f"{key}: the next hop {endpoint_text(*hop)} is this queue manager "
                    "itself (server.listen, its names or server.aliases): its messages would circle"
                )
                raise ConfigError(msg)


def _aliases(values: list[Any]) -> tuple[tuple[str, int | None], ...]:
    aliases: list[tuple[str, int | None]] = []
    for value in values:
        try:
            host, port = names.split_host_port(str(value).strip())
        except InvalidName as exc:
            msg = f"server.aliases: {exc}"
            raise ConfigError(msg) from None
        if not host or "\\" in host or "/" in host:
            msg = f"server.aliases: {value!r} is not a host name, an address or HOST:PORT"
            raise ConfigError(msg)
        aliases.append((host.lower(), port))
    return tuple(dict.fromkeys(aliases))


def _routes(values: dict[str, str | list[str]]) -> RouteTable:
    try:
        return RouteTable.parse(values)
    except RouteError as exc:
        raise ConfigError(str(exc)) from None


def _pinned(values: dict[str, Any]) -> dict[str, uuid.UUID]:
    pinned = {}
    for identity, text in values.items():
        try:
            pinned[identity] = uuid.UUID(str(text).strip("{}"))
        except ValueError:
            msg = f"tls.pinned.{identity}: {text!r} is not a queue manager GUID"
            raise ConfigError(msg) from None
    return pinned


def _check_listeners(config: Config) -> None:
    """Each listener on a port of its own: two on one port (the same host, or
    a wildcard beside an address of its family) would bind and fail only at
    ``listen``."""
    listeners = [("server.listen", config.listen), ("server.client_listen", config.client_listen)]
    if config.http_listen is not None:
        listeners.append(("http.listen", config.http_listen))
    for index, (name, address) in enumerate(listeners):
        for other_name, other in listeners[:index]:
            if address.port == 0 or address.port != other.port:
                continue
            if address.host == other.host or _overlaps(address.host, other.host):
                msg = (
                    f"{name} and {other_name} are both on port {address.port} "
                    f"({other} and {address}): give each listener its own port"
                )
                raise ConfigError(msg)


def _overlaps(host: str, other: str) -> bool:
    """One of the two is its family's wildcard and the other of that family."""
    for wildcard, v6 in (("0.0.0.0", False), ("::", True)):
        for one, two in ((host, other), (other, host)):
            if one == wildcard and (":" in two) == v6:
                return True
    return False


def _check_tls(config: Config) -> None:
    """The TLS and authentication keys must make sense together."""
    if config.tls_certificate is None:
        if config.tls_key is not None:
            msg = "tls.key is set but tls.certificate is not"
            raise ConfigError(msg)
    elif config.tls_key is None or config.tls_ca is None:
        msg = "tls.certificate needs tls.key and tls.ca (the CA of peers and clients)"
        raise ConfigError(msg)
    tokens = config.auth_tokens or config.auth_tokens_file is not None
    if (
        config.auth_required
        and not config.tls_on_clients
        and not tokens
        and config.unix_socket is None
    ):
        msg = (
            "auth.required needs a way for clients to authenticate: TLS on the client port "
            "(tls.certificate; a client certificate signed by tls.ca), tokens (auth.tokens) "
            "or the Unix-domain socket (server.unix_socket)"
        )
        raise ConfigError(msg)


def _entries(key: str, values: list[Any]) -> frozenset[str]:
    """Principals and groups, spelled as list entries (``permissions.acl_entry``)."""
    from qmgr.core.permissions import acl_entry

    try:
        return frozenset(acl_entry(str(value)) for value in values)
    except ValueError as exc:
        msg = f"{key}: {exc}"
        raise ConfigError(msg) from None


def _default_acl(values: dict[str, Any]) -> dict[str, list[str]]:
    from qmgr.core.permissions import acl_entry, parse_rights

    acl: dict[str, list[str]] = {}
    for typed, rights in values.items():
        try:
            entry = acl_entry(str(typed))
        except ValueError as exc:
            msg = f"auth.default_acl: {exc}"
            raise ConfigError(msg) from None
        words = [rights] if isinstance(rights, str) else rights
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            msg = f"auth.default_acl.{entry} must be a list of rights, not {rights!r}"
            raise ConfigError(msg)
        try:
            parse_rights(words)
        except ValueError as exc:
            msg = f"auth.default_acl.{entry}: {exc}"
            raise ConfigError(msg) from None
        acl[entry] = [*acl.get(entry, []), *(str(word) for word in words)]
    return acl


def _tokens(values: dict[str, Any]) -> dict[str, str]:
    from qmgr.core.tokens import parse_hash, token_name_problem

    tokens = {}
    for name, text in values.items():
        problem = token_name_problem(str(name), in_file=False)
        if problem is not None:
            msg = f"auth.tokens.{name}: {problem}"
            raise ConfigError(msg)
        try:
            parse_hash(str(text))
        except ValueError as exc:
            msg = f"auth.tokens.{name}: {exc}"
            raise ConfigError(msg) from None
        tokens[str(name)] = str(text)
    return tokens
