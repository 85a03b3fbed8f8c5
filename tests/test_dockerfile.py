"""The Dockerfile's commands, read as ``qmgr serve`` reads them (nothing is built or
started): the default command admits peers from other hosts, and every command
the file gives serves the Unix-domain socket its health check uses."""

from __future__ import annotations

import ipaddress
import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from qmgr.cli import cli
from qmgr.config import Config
from qmgr.server.tls import check_exposure

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
#: Where the image has the shipped configuration (``COPY config/qmgr.toml ...``).
IMAGE_CONFIG = "/etc/qmgr/qmgr.toml"


def _joined(lines: list[str]) -> list[str]:
    """``lines`` with each line ending in a backslash joined to the next."""
    joined: list[str] = []
    pending = ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    return joined


def _instruction(keyword: str) -> str:
    """The arguments of the Dockerfile's (last) ``keyword`` instruction."""
    lines = DOCKERFILE.read_text(encoding="utf-8").splitlines()
    found = [
        line.split(None, 1)[1]
        for line in _joined([line for line in lines if not line.lstrip().startswith("#")])
        if line.split(None, 1)[:1] == [keyword]
    ]
    assert found, f"no {keyword} in the Dockerfile"
    return found[-1]


def _documented_commands() -> list[list[str]]:
    """The ``qmgr serve`` commands the Dockerfile's comments give to ``docker run``."""
    comments = [
        line.lstrip()[1:].strip()
        for line in DOCKERFILE.read_text(encoding="utf-8").splitlines()
        if line.lstrip().startswith("#")
    ]
    commands = []
    for line in _joined(comments):
        words = shlex.split(line) if line.startswith("docker run") else []
        if "serve" in words:
            commands.append(words[words.index("serve") :])
    return commands


def _health_socket() -> Path:
    """The Unix-domain socket the health check connects to."""
    check = json.loads(_instruction("HEALTHCHECK").split("CMD", 1)[1])
    server = check[check.index("--server") + 1]
    assert server.startswith("unix:"), check
    return Path(server.removeprefix("unix:"))


def _served(arguments: list[str], monkeypatch: pytest.MonkeyPatch) -> Config:
    """The configuration ``qmgr ARGUMENTS`` would serve, the image's configuration file
    being the shipped one."""
    assert f"COPY config/qmgr.toml {IMAGE_CONFIG}" in DOCKERFILE.read_text(encoding="utf-8")
    arguments = [str(ROOT / "config" / "qmgr.toml") if a == IMAGE_CONFIG else a for a in arguments]
    served: list[Config] = []

    async def serve(config: Config) -> None:  # instead of serving until stopped
        served.append(config)

    monkeypatch.setattr("qmgr.server.serve", serve)
    result = CliRunner().invoke(cli, arguments)
    assert (result.exit_code, served != []) == (0, True), result.output
    return served[0]


def test_the_default_command_admits_peers_of_other_hosts_over_mutual_tls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert json.loads(_instruction("ENTRYPOINT")) == ["qmgr"]
    config = _served(json.loads(_instruction("CMD")), monkeypatch)
    for peer in ("198.51.100.7", "10.1.2.3", "2001:db8::7"):
        address = ipaddress.ip_address(peer)
        assert any(address in network for network in config.peer_accept_from), peer
    # Which is safe only because every listener it opens to them is protected.
    assert (config.tls_peers, config.auth_required, check_exposure(config)) == (True, True, [])
    assert config.tls_certificate is not None


def test_every_command_it_gives_serves_the_health_check_s_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    socket = _health_socket()
    commands = [json.loads(_instruction("CMD")), *_documented_commands()]
    assert len(commands) >= 2  # the default command and the one for clients inside
    for command in commands:
        assert _served(command, monkeypatch).unix_socket == socket, command
