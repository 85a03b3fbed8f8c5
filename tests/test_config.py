"""Configuration: the shipped file is the embedded default; precedence; errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qmgr.config import ConfigError, default_config_text, load_config, local_identity

ROOT = Path(__file__).resolve().parent.parent


def test_the_shipped_file_is_the_embedded_default() -> None:
    assert (ROOT / "config" / "qmgr.toml").read_text(encoding="utf-8") == default_config_text()


def test_defaults() -> None:
    config = load_config()
    assert str(config.client_listen) == "127.0.0.1:1802"
    assert str(config.listen) == "127.0.0.1:1801"
    assert config.max_map_size is None
    assert config.name
    # Secure by default: nothing other hosts can reach, no TLS until it is configured.
    assert (config.insecure, config.tls_certificate, config.auth_required) == (False, None, False)
    assert (config.tls_on_clients, config.tls_on_peers) == (False, False)
    # The HTTP listener: loopback, plain until TLS is configured, nobody a monitor.
    assert str(config.http_listen) == "127.0.0.1:1803"
    assert (config.tls_http, config.tls_on_http, config.auth_monitors) == (True, False, frozenset())
    assert (config.http_max_connections, config.http_keep_alive_timeout) == (64, 5.0)
    assert config.http_request_timeout == 10.0


def test_the_http_listener_is_configured_or_turned_off() -> None:
    assert load_config(http_listen="").http_listen is None
    assert load_config(settings=['http.listen=""']).http_listen is None
    config = load_config(
        http_listen="[::1]:9100",
        settings=[
            "http.max_connections=8",
            "http.keep_alive_timeout=2",
            'auth.monitors=["prometheus", "group:ops"]',
        ],
    )
    assert config.http_listen is not None
    assert (config.http_listen.host, config.http_listen.port) == ("::1", 9100)
    assert (config.http_max_connections, config.http_keep_alive_timeout) == (8, 2.0)
    assert config.auth_monitors == frozenset({"prometheus", "group:ops"})
    with pytest.raises(ConfigError, match=r"http\.listen: expected HOST:PORT"):
        load_config(http_listen="nowhere")
    with pytest.raises(ConfigError, match=r"http\.max_connections must be positive"):
        load_config(settings=["http.max_connections=0"])
    with pytest.raises(ConfigError, match=r"http\.request_timeout must be positive"):
        load_config(settings=["http.request_timeout=0"])


def test_aliases_and_the_router_role() -> None:
    assert (load_config().aliases, load_config().peer_router) == ((), False)
    config = load_config(
        settings=(
            'server.aliases=["203.0.113.5:11801", "QM1.example.net", "[2001:db8::5]:1801",'
            ' "2001:db8::6", "qm1.example.net"]',
            "peers.router=true",
        )
    )
    assert config.aliases == (
        ("203.0.113.5", 11801),
        ("qm1.example.net", None),
        ("2001:db8::5", 1801),
        ("2001:db8::6", None),
    )
    assert config.peer_router


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        (
            ('routes."127.0.0.1:1801"="127.0.0.1:1901"',),
            'routes."127.0.0.1:1801": the destination is this queue manager',
        ),
        (
            ('server.aliases=["203.0.113.5:11801"]', 'routes."203.0.113.5:11801"="10.0.0.5"'),
            "the destination is this queue manager",
        ),
        (
            ('routes."10.0.2.7:1801"="127.0.0.1:1801"',),
            'routes."10.0.2.7:1801": the next hop 127.0.0.1:1801 is this queue manager itself',
        ),
        (
            ('server.aliases=["gw.example.net"]', 'routes."10.0.2.7"="gw.example.net"'),
            "the next hop gw.example.net:1801 is this queue manager itself",
        ),
        (
            ('server.listen="0.0.0.0:1901"', 'routes."10.0.2.7"="127.0.0.2:1901"'),
            "the next hop 127.0.0.2:1901 is this queue manager itself",
        ),
        (
            ('routes."*"=["10.0.0.5", "127.0.0.1:1801"]',),
            'routes."*": the next hop 127.0.0.1:1801 is this queue manager itself',
        ),
    ],
)
def test_a_route_may_not_lead_here(settings: tuple[str, ...], reason: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(reason)):
        load_config(settings=settings, insecure=True)


@pytest.mark.parametrize(
    ("setting", "reason"),
    [
        ('routes."10.1.0.0/33"="g:1801"', "'10.1.0.0/33' is not a CIDR network"),
        ('routes."*.x*.example"="g:1801"', "is not a DNS suffix"),
        ('routes."a*b"="g:1801"', "'*' stands alone or before a DNS suffix"),
        ('routes."b:99999"="g:1801"', "expected HOST[:PORT]"),
        ('routes."b:1801"="g:x"', "expected HOST[:PORT]"),
        ('routes."b:1801"=[]', "must be a next hop"),
        ('routes."b:1801"=["g", 5]', "must be a next hop"),
        ('routes."b:1801"=["g", "g:1801"]', "names the next hop 'g:1801' twice"),
        ('routes."b:1801"=7', "must be a next hop"),
    ],
)
def test_a_route_that_does_not_parse_is_refused(setting: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(reason)):
        load_config(settings=(setting,))


def test_two_keys_for_the_same_destinations_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "qmgr.toml"
    path.write_text('[routes]\n"b" = "g1"\n"b:1801" = "g2"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape("the same destinations as another entry")):
        load_config(path)


def test_routes_by_network_suffix_and_default_with_alternates(tmp_path: Path) -> None:
    path = tmp_path / "qmgr.toml"
    path.write_text(
        "[peers]\nroute_failover_after = 4\n[routes]\n"
        '"*" = ["gate1.site-a.example", "gate2.site-a.example:1901"]\n'
        '"10.1.0.0/16" = "direct"\n'
        '"*.site-b.example" = "gate.site-b.example"\n',
        encoding="utf-8",
    )
    config = load_config(path)
    assert config.peer_route_failover_after == 4.0
    assert config.routes.hops(("10.1.7.7", 1801)) == (("10.1.7.7", 1801),)
    assert config.routes.hops(("qm3.site-b.example", 1801)) == (("gate.site-b.example", 1801),)
    assert config.routes.hops(("10.2.0.1", 1801)) == (
        ("gate1.site-a.example", 1801),
        ("gate2.site-a.example", 1901),
    )


def test_routes_to_other_queue_managers_are_kept() -> None:
    config = load_config(
        settings=(
            'routes."127.0.0.1:1903"="127.0.0.1:1902"',  # another port on this host
            'routes."10.0.2.7"="10.0.0.5"',
        )
    )
    assert config.routes.hops(("127.0.0.1", 1903)) == (("127.0.0.1", 1902),)
    assert config.routes.hops(("10.0.2.7", 1801)) == (("10.0.0.5", 1801),)
    assert config.routes.hops(("10.0.2.7", 1802)) == (("10.0.2.7", 1802),)
    assert [route.key for route in config.routes] == ["127.0.0.1:1903", "10.0.2.7:1801"]


def test_file_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "qmgr.toml"
    path.write_text(
        '[server]\nname = "from-file"\ndata_dir = "/srv/q"\n[transactions]\nidle_timeout = 5\n'
    )
    config = load_config(path, name="from-flag")
    assert config.name == "from-flag"
    assert config.data_dir == Path("/srv/q")
    assert config.tx_idle_timeout == 5.0


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[server]\nlisten = 'nowhere'\n", "HOST:PORT"),
        ("[auth]\ngroups = { ops = 'alice' }\n", "auth.groups must map each group to a list"),
        ("[auth]\ngroups = { ops = 5 }\n", "auth.groups must map each group to a list"),
        ("[auth]\nadmins = [1]\n", "auth.admins must be a list of strings, not holding 1"),
        ("[auth]\nmonitors = [true]\n", "auth.monitors must be a list of strings"),
        ("[tls]\nrelays = [1]\n", "tls.relays must be a list of strings"),
        ("[server]\naliases = [1]\n", "server.aliases must be a list of strings"),
        ("[peers]\naccept_from = [1]\n", "peers.accept_from must be a list of strings"),
        ("[peers]\nresend_intervals = ['a']\n", "peers.resend_intervals must be a non-empty"),
        ("[peers]\nresend_intervals = [true]\n", "peers.resend_intervals must be a non-empty"),
        ("[peers]\nresend_intervals = [30, inf]\n", "peers.resend_intervals must be a non-empty"),
        ("[server]\ndata_dir = ''\n", "server.data_dir must not be empty"),
        (
            "[server]\nlisten = '127.0.0.1:5001'\nclient_listen = '127.0.0.1:5001'\n",
            "server.client_listen and server.listen are both on port 5001",
        ),
        (
            "[server]\nlisten = '0.0.0.0:5001'\n[http]\nlisten = '127.0.0.1:5001'\n",
            "http.listen and server.listen are both on port 5001",
        ),
        ("[store]\nmax_map_size = 1000\n", "store.max_map_size must be 1048576 (1 MiB) to"),
        ("[store]\ninitial_map_size = 4096\n", "store.initial_map_size must be 1048576"),
        # A typo with three zeros too many: no such map fits the address space.
        ("[store]\ninitial_map_size = 1099511627776000\n", "(64 TiB), not 1099511627776000"),
        ("[store]\nreserve_size = 18446744073709551615\n", "store.reserve_size must be 0 to"),
        ("[peers]\nack_timeout = 5000000\n", "peers.ack_timeout must be more than 0 and at"),
        ("[peers]\norder_ack_delay = inf\n", "peers.order_ack_delay must be a finite number"),
        ("[peers]\nidle_timeout = nan\n", "peers.idle_timeout must be a finite number"),
        (
            "[peers]\norder_ack_delay = 20\norder_ack_max_delay = 1\n",
            "peers.order_ack_max_delay must not be below peers.order_ack_delay",
        ),
        (
            f"[server]\nname = '{'q' * 254}'\n",
            "server.name must be a host name peers can write in DIRECT=OS:NAME",
        ),
        ("[server]\nname = 'bad name'\n", "server.name must be a host name peers can write"),
        ("[server]\nname = '  '\n", "server.name must be a host name peers can write"),
        ('[server]\nname = "a\\u0000b"\n', "server.name must be a host name peers can write"),
        ("[server]\nbogus = 1\n", "unknown key server.bogus"),
        ("[nonsense]\n", "unknown section"),
        ("[store]\nmax_map_size = 'big'\n", "must be int"),
        ("[log]\nformat = 'xml'\n", "log.format must be one of"),
        ("[transactions]\nidle_timeout = 0\n", "must be positive"),
        ("[server\n", "qmgr.toml"),
        ("[tls]\ncertificate = 'qm.crt'\n", "needs tls.key and tls.ca"),
        ("[tls]\nkey = 'qm.key'\n", "tls.key is set but tls.certificate is not"),
        ("[tls]\nmin_version = '1.1'\n", "tls.min_version must be one of 1.2, 1.3"),
        ("[tls]\npinned = { qm-b = 'nonsense' }\n", "is not a queue manager GUID"),
        ("[auth]\nrequired = true\n", "auth.required needs a way for clients to authenticate"),
        ("[auth]\ndefault_acl = { everyone = ['write'] }\n", "unknown right 'write'"),
        ("[auth]\ndefault_acl = { everyone = 3 }\n", "must be a list of rights"),
        ("[auth]\ndefault_acl = { 'group:' = ['send'] }\n", "'group:' names no group"),
        ("[auth]\nadmins = ['peer:']\n", "auth.admins: 'peer:' names no peer"),
        ("[server]\naliases = 'qm1.example.net'\n", "server.aliases must be list"),
        ("[server]\naliases = ['qm1:99999']\n", "server.aliases: 'qm1:99999'"),
        ("[server]\naliases = ['']\n", "server.aliases: ''"),
        ("[server]\naliases = ['a\\\\b']\n", "is not a host name"),
        ("[peers]\nrouter = 'yes'\n", "peers.router must be bool"),
    ],
)
def test_bad_files_say_what_is_wrong(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "qmgr.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(reason)):
        load_config(path)


#: What an address written ``IPv6:PORT`` is refused with.
BRACKETS = "write an IPv6 address with a port as [addr]:port"


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        (
            {"listen": "fd55::2"},
            "server.listen: expected HOST:PORT, got 'fd55::2' "
            "(write an IPv6 address with a port as [fd55::2]:PORT)",
        ),
        (
            {"client_listen": "::1:28041"},
            f"server.client_listen: '::1:28041' is not an IPv6 address; {BRACKETS} ([::1]:28041)",
        ),
        (
            {"http_listen": "[::1:28041"},
            f"http.listen: '[::1:28041': unterminated [IPv6 address]; {BRACKETS}",
        ),
        (
            {"settings": ['server.aliases=["fd55::2:28001"]']},
            f"server.aliases: 'fd55::2:28001' is not an IPv6 address; {BRACKETS} ([fd55::2]:28001)",
        ),
        (
            {"settings": ['routes."fd55::3/128"="fd55::2:28001"']},
            "routes.\"fd55::3/128\": expected HOST[:PORT]: 'fd55::2:28001' is not an IPv6 "
            f"address; {BRACKETS} ([fd55::2]:28001)",
        ),
    ],
)
def test_an_ipv6_address_with_a_port_needs_brackets(
    overrides: dict[str, object], reason: str
) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(**overrides)
    assert str(excinfo.value) == reason


def test_ipv6_listening_addresses_and_aliases_in_brackets() -> None:
    config = load_config(
        listen="[fe80::1%eth0]:28001",
        client_listen="[::1]:0",
        settings=['server.aliases=["[FD55::2]:28001", "fd55::2:2800"]'],
    )
    assert (config.listen.host, config.listen.port) == ("fe80::1%eth0", 28001)
    assert str(config.listen) == "[fe80::1%eth0]:28001"
    assert (config.client_listen.host, config.client_listen.port) == ("::1", 0)
    # Without brackets, fd55::2:2800 is an address (on the peer port), not a port.
    assert config.aliases == (("fd55::2", 28001), ("fd55::2:2800", None))


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml")


def test_text_settings_take_a_bare_word_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    config = load_config(settings=["server.name=2024", "server.data_dir=~/queues"])
    assert config.name == "2024"
    assert str(config.data_dir) == "/home/someone/queues"
    quoted = load_config(settings=['server.name="true"'])
    assert quoted.name == "true"
    with pytest.raises(ConfigError, match="must be int"):
        load_config(settings=["limits.max_frame_bytes=lots"])


def test_tls_settings(tmp_path: Path) -> None:
    path = tmp_path / "qmgr.toml"
    path.write_text(
        "[tls]\ncertificate = 'qm.crt'\nkey = 'qm.key'\nca = 'ca.crt'\npeers = false\n"
        "pinned = { qm-b = '{5f8c0000-0000-4000-8000-000000000001}' }\nrelays = ['router']\n"
        "[auth]\nrequired = true\n"
    )
    config = load_config(path)
    assert config.tls_certificate == Path("qm.crt").absolute()
    assert (config.tls_on_clients, config.tls_on_peers, config.auth_required) == (True, False, True)
    assert str(config.tls_pinned["qm-b"]) == "5f8c0000-0000-4000-8000-000000000001"
    assert config.tls_relays == frozenset({"router"})
    defaults = load_config()
    assert defaults.auth_default_acl == {"everyone": ["send", "get-properties"]}
    assert (defaults.auth_admins, defaults.auth_groups) == (frozenset(), {})


def test_entries_are_spelled_as_lists_match_them() -> None:
    config = load_config(
        settings=[
            "auth.default_acl={ Everyone = ['send'], everyone = ['peek'] }",
            "auth.admins=['GROUP:wheel', 'root']",
            "auth.monitors=['Peer:prom']",
        ]
    )
    assert config.auth_default_acl == {"everyone": ["send", "peek"]}
    assert config.auth_admins == frozenset({"group:wheel", "root"})
    assert config.auth_monitors == frozenset({"peer:prom"})


@pytest.mark.parametrize("name", ["group:ops", "peer:qm-b", "everyone", "Everyone", "GROUP:x"])
def test_a_token_may_not_be_named_for_a_group_or_a_peer(name: str) -> None:
    with pytest.raises(ConfigError, match=f"auth.tokens.{name}: .*names a group, a peer"):
        load_config(None, settings=(f'auth.tokens={{ "{name}" = "sha256:{"0" * 64}" }}',))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[auth]\ntokens = {}\n[auth.tokens]\nbob = "sha256:00"\n', "('auth', 'tokens') twice"),
        ('[routes]\nbob = "sha256:00"\n', "routes.bob = 'sha256:00'..."),
        ('[log]\nbob = "sha256:00"\n', "log.bob = 'sha256:00'..."),
    ],
)
def test_a_token_line_out_of_its_table_is_said_to_belong_there(
    tmp_path: Path, text: str, says: str
) -> None:
    """A configuration copied from an older release (``tokens = {}`` in
    ``[auth]``), or a line appended to a file that does not end with
    ``[auth.tokens]``: the error says where the line goes."""
    config = tmp_path / "qmgr.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(config)
    assert says in str(refused.value)
    assert "goes in the one [auth.tokens] table" in str(refused.value)


def test_every_path_setting_is_taken_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not from the configuration file's directory: one rule for the file, --set
    and the flags, as data_dir has always had. Each is kept absolute, so that
    what is said about it names the file that was tried."""
    (tmp_path / "etc").mkdir()
    file = tmp_path / "etc" / "qmgr.toml"
    file.write_text(
        "[server]\ndata_dir = 'var'\nunix_socket = 'run/qmgr.sock'\n"
        "[tls]\ncertificate = 'tls/qm.crt'\nkey = 'tls/qm.key'\nca = 'tls/ca.crt'\n"
        "[auth]\ntokens_file = 'tokens'\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/someone")
    config = load_config(file)
    paths = (config.data_dir, config.unix_socket, config.tls_certificate, config.tls_key)
    assert paths == (
        tmp_path / "var",
        tmp_path / "run" / "qmgr.sock",
        tmp_path / "tls" / "qm.crt",
        tmp_path / "tls" / "qm.key",
    )
    assert (config.tls_ca, config.auth_tokens_file) == (
        tmp_path / "tls/ca.crt",
        tmp_path / "tokens",
    )
    home = load_config(file, settings=["auth.tokens_file=~/tokens", "server.unix_socket=~/q.sock"])
    assert home.auth_tokens_file == Path("/home/someone/tokens")
    assert home.unix_socket == Path("/home/someone/q.sock")
    # A socket path whose absolute form a Unix-domain socket could not bind to
    # (a deep working directory) stays relative, as the release before bound it.
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert load_config(settings=["server.unix_socket=q.sock"]).unix_socket == Path("q.sock")


def test_the_names_this_queue_manager_takes_as_its_own() -> None:
    """Its listen host name (which it gives peers as its admin and response
    queues' host) and its name, with or without a final dot, are its own: a
    router must not relay its own acknowledgments to itself."""
    config = load_config(settings=["server.listen=qm-a.example:28001", "server.name=qm1.example."])
    identity = local_identity(config)
    for host in ("qm-a.example", "QM-A.example.", "qm1.example", "qm1.example."):
        assert identity.is_local(host, 28001), host
        assert identity.is_local(host, None), host
    assert not identity.is_local("qm-b.example", 28001)
    by_address = local_identity(load_config(settings=["server.listen=[FD55:0::1]:28001"]))
    assert by_address.is_local("[fd55::1]", 28001)
