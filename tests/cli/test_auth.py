"""``qmgr auth token`` (``qmgr/cli/auth.py``): a token, once, and the line to accept it."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from qmgr.core.tokens import hash_token

from .kit import ok, run


def _token(output: str) -> str:
    match = re.search(r"it is not kept anywhere\):\n  (\S+)\n", output)
    assert match, output
    return match.group(1)


def test_a_token_and_its_configuration_line() -> None:
    output = ok(run(None, "auth", "token", "alice")).stdout
    token = _token(output)
    assert output.splitlines()[:3] == [
        "for the queue manager's configuration:",
        "  [auth.tokens]",
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


@pytest.mark.parametrize("name", ["two words", "tab\there", "x" * 257])
def test_a_principal_name_has_no_spaces_and_at_most_256_characters(name: str) -> None:
    result = run(None, "auth", "token", name)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: a principal name has no spaces and at most 256 characters, not {name!r}\n"
    )
