"""``qmgr auth token`` (``qmgr/cli/auth.py``): a token, once, and the line to accept it,
which the queue manager loads: names it would refuse are refused, with its own check."""

from __future__ import annotations

import re
import stat
import tomllib
from pathlib import Path

import pytest

from qmgr.config import default_config_text, load_config
from qmgr.core.tokens import hash_token, read_tokens_file, token_name_problem

from .kit import ok, run


def _token(output: str) -> str:
    match = re.search(r"it is not kept anywhere\):\n  (\S+)\n", output)
    assert match, output
    return match.group(1)


def test_a_token_and_its_configuration_line() -> None:
    output = ok(run(None, "auth", "token", "alice")).stdout
    token = _token(output)
    assert output.splitlines()[:3] == [
        "for the queue manager's configuration, a line of its [auth.tokens] table",
        "(the shipped qmgr.toml ends with that table: append the line to the file):",
        f'  alice = "{hash_token(token)}"',
    ]
    assert output.splitlines()[-1] == (
        "clients use it with --token or QMGR_TOKEN, or connect(..., token=...)"
    )
    assert _token(ok(run(None, "auth", "token", "alice")).stdout) != token


def test_a_tokens_file_is_appended_to_and_private(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    first = ok(run(None, "auth", "token", "alice", "--file", str(tokens))).stdout
    assert first.startswith(f"added alice to {tokens} (restart the queue manager to load it)\n")
    second = ok(run(None, "auth", "token", "bob", "--file", str(tokens))).stdout
    assert tokens.read_text().splitlines() == [
        f"alice {hash_token(_token(first))}",
        f"bob {hash_token(_token(second))}",
    ]
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o600


def test_an_unwritable_file_is_an_error(tmp_path: Path) -> None:
    result = run(None, "auth", "token", "alice", "--file", str(tmp_path / "no" / "tokens"))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot write {tmp_path / 'no' / 'tokens'}: ")


def _configuration_line(output: str) -> str:
    """The line of ``[auth.tokens]`` that the output gives for the configuration."""
    lines = output.split("\n")  # not splitlines(): a name may hold U+2028
    assert "a line of its [auth.tokens] table" in lines[0], output
    return lines[2].removeprefix("  ") + "\n"


@pytest.mark.parametrize(
    "name",
    ["everyone", "peer:qm2", "group:ops", "", "tab\there", "bell\a", "del\x7f", "bad\udcff"],
)
@pytest.mark.parametrize("in_file", [False, True], ids=["printed", "file"])
def test_a_name_the_queue_manager_refuses_is_a_usage_error(
    tmp_path: Path, name: str, in_file: bool
) -> None:
    tokens = tmp_path / "tokens"
    result = run(None, "auth", "token", name, *(["--file", str(tokens)] if in_file else []))
    assert result.exit_code == 2, result.output
    problem = token_name_problem(name, in_file=in_file)
    assert problem is not None
    assert f"Error: Invalid value for 'NAME': {problem}" in result.stderr
    assert result.stdout == ""
    assert not tokens.exists()
    if name.startswith(("everyone", "peer:", "group:")):
        assert "names a group, a peer or everyone, not a client" in problem


@pytest.mark.parametrize("name", ["two words", "a#b", "nbsp\u00a0x", "line\u2028sep"])
def test_a_name_a_tokens_file_cannot_hold_is_refused_there_only(tmp_path: Path, name: str) -> None:
    tokens = tmp_path / "tokens"
    refused = run(None, "auth", "token", name, "--file", str(tokens))
    assert refused.exit_code == 2, refused.output
    assert "which a line of the tokens file (NAME HASH, '#' starting a comment) cannot hold" in (
        refused.stderr
    )
    assert not tokens.exists()
    # The configuration's table can hold it.
    ok(run(None, "auth", "token", name))


@pytest.mark.parametrize(
    "name",
    [
        "x.y",
        "two words",
        'say "hi"',
        "back\\slash",
        "ünïcödé",
        "a#b",
        "[x]",
        "x=y",
        "nbsp\u00a0x",
        "line\u2028sep",
        "x" * 300,
    ],
)
def test_the_configuration_line_is_toml_the_queue_manager_loads(tmp_path: Path, name: str) -> None:
    output = ok(run(None, "auth", "token", name)).stdout
    line = _configuration_line(output)
    hashed = hash_token(_token(output))
    assert tomllib.loads(f"[auth.tokens]\n{line}") == {"auth": {"tokens": {name: hashed}}}
    config = tmp_path / "qmgr.toml"
    config.write_text(f"[auth.tokens]\n{line}", encoding="utf-8")
    assert load_config(config).auth_tokens == {name: hashed}


def test_the_lines_printed_can_be_appended_to_the_shipped_configuration(tmp_path: Path) -> None:
    """As the output says: each line appended to a copy of ``config/qmgr.toml``,
    one token after another, and the queue manager loads them all."""
    config = tmp_path / "qmgr.toml"
    config.write_text(default_config_text(), encoding="utf-8")
    hashes = {}
    for name in ("alice", "x.y"):
        output = ok(run(None, "auth", "token", name)).stdout
        with config.open("a", encoding="utf-8") as file:
            file.write(_configuration_line(output))
        hashes[name] = hash_token(_token(output))
    assert load_config(config).auth_tokens == hashes


def test_every_line_added_to_a_tokens_file_is_one_the_queue_manager_loads(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens"
    names = ["alice", "x.y", "ünï", "peer-x", "group-ops", "everyone2", "x" * 300]
    for name in names:
        ok(run(None, "auth", "token", name, "--file", str(tokens)))
    assert sorted(read_tokens_file(tokens)) == sorted(names)
    again = run(None, "auth", "token", "alice", "--file", str(tokens))
    assert again.exit_code == 1
    assert again.stderr == (
        f"error: 'alice' has a token in {tokens} already\n"
        "hint: remove its line to give it a new one\n"
    )
    assert sorted(read_tokens_file(tokens)) == sorted(names)  # unchanged, still loadable
    # A last line without its newline: the new line starts a line of its own.
    tokens.write_text(tokens.read_text().rstrip("\n"))
    ok(run(None, "auth", "token", "bob", "--file", str(tokens)))
    assert sorted(read_tokens_file(tokens)) == sorted([*names, "bob"])
    tokens.write_text("# the operators' tokens")
    ok(run(None, "auth", "token", "carol", "--file", str(tokens)))
    assert read_tokens_file(tokens) == {"carol": read_tokens_file(tokens)["carol"]}
    # A file other users may write is one the queue manager refuses: so does this.
    tokens.chmod(0o622)
    writable = run(None, "auth", "token", "dave", "--file", str(tokens))
    assert writable.exit_code == 1
    assert "can be written by other users" in writable.stderr
    tokens.chmod(0o600)
    tokens.write_text("alice\n")
    broken = run(None, "auth", "token", "bob", "--file", str(tokens))
    assert broken.exit_code == 1
    assert f"auth.tokens_file {tokens}, line 1: expected NAME HASH" in broken.stderr
    assert tokens.read_text() == "alice\n"
