"""``qmgr serve``'s configuration errors, in-process (nothing starts).

The daemon itself, its start-up errors and its signals run as subprocesses in
``tests/integration/test_cli.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .kit import run


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--set", "nonsense"], "error: --set 'nonsense': expected SECTION.KEY=VALUE"),
        (["--set", "server.nmae=1"], "error: --set: unknown key server.nmae"),
        (["--listen", "nohostport"], "error: server.listen: expected HOST:PORT, got 'nohostport'"),
        (
            ["--config", "/nonexistent/qmgr.toml"],
            "error: cannot read config file /nonexistent/qmgr.toml: No such file or directory",
        ),
    ],
    ids=["not a setting", "unknown key", "bad address", "no config file"],
)
def test_a_configuration_error_exits_2(tmp_path: Path, args: list[str], error: str) -> None:
    data = tmp_path / "data"
    result = run(None, "serve", "--data-dir", str(data), *args)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [error]
    assert result.stdout == ""
    assert not data.exists()


@pytest.mark.parametrize(
    "args",
    [["--data-dir", ""], ["--set", 'server.data_dir=""'], ["--data-dir", " "]],
    ids=["flag", "setting", "blank flag"],
)
def test_an_empty_data_directory_is_refused_however_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    def started(config: object) -> None:
        raise AssertionError("the daemon started")  # in the current directory

    monkeypatch.setattr("qmgr.server.serve", started)
    monkeypatch.chdir(tmp_path)
    result = run(None, "serve", *args)
    assert (result.exit_code, result.stderr.splitlines()) == (
        2,
        ["error: server.data_dir must not be empty"],
    )
    assert list(tmp_path.iterdir()) == []


#: What a listening address or a route written ``IPv6:PORT`` is refused with.
BRACKETS = "write an IPv6 address with a port as [addr]:port"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["--listen", "fd55::2"],
            "error: server.listen: expected HOST:PORT, got 'fd55::2' "
            "(write an IPv6 address with a port as [fd55::2]:PORT)",
        ),
        (
            ["--client-listen", "::1:30041"],
            f"error: server.client_listen: '::1:30041' is not an IPv6 address; {BRACKETS} "
            "([::1]:30041)",
        ),
        (
            ["--http-listen", "[::1]30041"],
            f"error: http.listen: '[::1]30041': unexpected '30041' after the address; {BRACKETS}",
        ),
        (
            ["--set", 'routes."fd55::3:28001"="[fd55::1]:28001"'],
            "error: routes.\"fd55::3:28001\": expected HOST[:PORT]: 'fd55::3:28001' is not an "
            f"IPv6 address; {BRACKETS} ([fd55::3]:28001)",
        ),
        (
            ["--set", 'server.aliases=["fd55::2:28001"]'],
            f"error: server.aliases: 'fd55::2:28001' is not an IPv6 address; {BRACKETS} "
            "([fd55::2]:28001)",
        ),
    ],
    ids=["no port", "listen", "after the brackets", "route", "alias"],
)
def test_an_ipv6_address_with_a_port_needs_brackets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], error: str
) -> None:
    def started(config: object) -> None:
        raise AssertionError("the daemon started")  # instead of running until stopped

    monkeypatch.setattr("qmgr.server.serve", started)
    result = run(None, "serve", "--data-dir", str(tmp_path / "data"), *args)
    assert (result.exit_code, result.stderr.splitlines()) == (2, [error])


def test_a_bad_choice_is_a_usage_error() -> None:
    result = run(None, "serve", "--log-format", "xml")
    assert result.exit_code == 2
    assert "Invalid value for '--log-format'" in result.stderr


@pytest.mark.usefixtures("restored_logging")
def test_with_json_logs_asked_for_a_failed_start_is_a_json_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log collector reading the daemon's JSON lines sees why it did not start."""
    from qmgr.server import StartupError

    async def port_taken(config: object) -> None:
        raise StartupError("cannot listen for clients on 127.0.0.1:1801: address already in use")

    monkeypatch.setattr("qmgr.server.serve", port_taken)
    data = str(tmp_path / "data")
    result = run(None, "serve", "--data-dir", data, "--log-format", "json")
    assert result.exit_code == 1
    [event] = [json.loads(line) for line in result.stderr.splitlines()]
    assert event["event"] == "start_failed"
    assert (event["level"], event["status"]) == ("error", 1)
    assert event["error"] == "cannot listen for clients on 127.0.0.1:1801: address already in use"

    result = run(None, "serve", "--data-dir", data, "--log-format", "json", "--set", "x.y=1")
    assert result.exit_code == 2
    [event] = [json.loads(line) for line in result.stderr.splitlines()]
    assert (event["event"], event["status"]) == ("start_failed", 2)
    assert event["error"] == "--set: unknown key x.y"

    result = run(None, "serve", "--data-dir", data, "--log-format", "console")
    assert (result.exit_code, result.stderr) == (
        1,
        "error: cannot listen for clients on 127.0.0.1:1801: address already in use\n",
    )


@pytest.mark.usefixtures("restored_logging")
@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--set", "store.max_map_size=5"], "store.max_map_size "),
        (["--set", 'tls.key="/etc/qmgr/key.pem"'], "tls.key is set but tls.certificate is not"),
        (["--set", "x.y=1"], "--set: unknown key x.y"),
    ],
    ids=["bad value", "tls key", "unknown setting"],
)
def test_json_logs_in_the_file_report_a_later_configuration_error_as_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], error: str
) -> None:
    """``log.format = "json"`` in the file is asked for by name too: what goes
    wrong once the file was read comes out as a ``start_failed`` event."""

    def started(config: object) -> None:
        raise AssertionError("the daemon started")

    monkeypatch.setattr("qmgr.server.serve", started)
    config = tmp_path / "qmgr.toml"
    config.write_text('[log]\nformat = "json"\n', encoding="utf-8")
    data = str(tmp_path / "data")
    result = run(None, "serve", "--config", str(config), "--data-dir", data, *args)
    assert result.exit_code == 2
    [event] = [json.loads(line) for line in result.stderr.splitlines()]
    assert (event["event"], event["level"], event["status"]) == ("start_failed", "error", 2)
    assert event["error"].startswith(error)

    # The flag wins over the file.
    result = run(
        None, "serve", "--config", str(config), "--data-dir", data, "--log-format", "console", *args
    )
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {error}")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[log]\nformat = "console"\n', "error: store.max_map_size "),
        ("[log]\nformat = \n", "error: "),
    ],
    ids=["console in the file", "the file does not parse"],
)
def test_without_json_logs_in_the_file_a_configuration_error_is_plain(
    tmp_path: Path, text: str, error: str
) -> None:
    config = tmp_path / "qmgr.toml"
    config.write_text(text, encoding="utf-8")
    data = str(tmp_path / "data")
    args = ["--config", str(config), "--data-dir", data, "--set", "store.max_map_size=5"]
    result = run(None, "serve", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith(error)
    assert len(result.stderr.splitlines()) == 1


def test_a_file_that_does_not_parse_is_reported_plainly_even_if_it_asks_for_json(
    tmp_path: Path,
) -> None:
    """Nothing of a file that does not parse is taken, ``log.format`` neither."""
    config = tmp_path / "qmgr.toml"
    config.write_text('[log]\nformat = "json"\n[nonsense]\n', encoding="utf-8")
    result = run(None, "serve", "--config", str(config), "--data-dir", str(tmp_path / "data"))
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: {config}: unknown section [nonsense]\n",
    )


@pytest.mark.usefixtures("restored_logging")
@pytest.mark.parametrize(
    ("settings", "error"),
    [
        (
            ["tls.certificate=tls/qm.crt", "tls.key=tls/qm.key", "tls.ca=tls/ca.crt"],
            "error: cannot load tls.certificate {cwd}/tls/qm.crt: No such file or directory",
        ),
        (
            ["auth.tokens_file=secrets/tokens"],
            "error: cannot read auth.tokens_file {cwd}/secrets/tokens: No such file or directory",
        ),
    ],
    ids=["certificate", "tokens file"],
)
def test_a_relative_path_is_taken_from_the_working_directory_and_said_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: list[str], error: str
) -> None:
    """As under systemd (working directory /): a file that is not there is named by
    the absolute path that was tried, whatever directory the configuration file is in."""
    (tmp_path / "etc").mkdir()
    config = tmp_path / "etc" / "qmgr.toml"
    config.write_text("[http]\nlisten = ''\n")
    monkeypatch.chdir(tmp_path)
    args = [arg for setting in settings for arg in ("--set", setting)]
    result = run(None, "serve", "--config", str(config), "--data-dir", "data", *args)
    assert (result.exit_code, result.stderr) == (2, error.format(cwd=tmp_path) + "\n")
    assert not (tmp_path / "data").exists()
