"""Client tokens (``qmgr.core.tokens``): made at random, kept only as hashes, read
from the configuration and a tokens file, and checked in constant time."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from qmgr.core.tokens import (
    HASH_PREFIX,
    MAX_TOKEN_CHARS,
    TokenBook,
    hash_token,
    load_tokens,
    new_token,
    parse_hash,
    read_tokens_file,
)


def test_a_token_is_random_and_kept_as_its_sha256() -> None:
    token = new_token()
    assert len(token) == 43
    assert new_token() != token
    stored = hash_token(token)
    assert stored.startswith(HASH_PREFIX)
    assert len(parse_hash(stored)) == 32
    assert parse_hash(f"  {stored}\n") == parse_hash(stored)


@pytest.mark.parametrize("text", ["", "sha256:abc", "md5:" + "0" * 64, "sha256:" + "g" * 64])
def test_anything_else_is_not_a_hash(text: str) -> None:
    with pytest.raises(ValueError, match="token hash"):
        parse_hash(text)


def test_a_book_names_the_principal_of_a_token() -> None:
    alice, bob = new_token(), new_token()
    book = TokenBook({"alice": hash_token(alice), "bob": hash_token(bob)})
    assert book
    assert book.principal_of(alice) == "alice"
    assert book.principal_of(bob) == "bob"
    for other in ("", new_token(), "x" * (MAX_TOKEN_CHARS + 1)):
        assert book.principal_of(other) is None
    assert not TokenBook({})


def test_a_tokens_file_has_one_name_and_hash_a_line(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    stored = hash_token("secret")
    path.write_text(f"# clients\nalice {stored}  # the first\n\nbob {hash_token('other')}\n")
    assert read_tokens_file(path) == {"alice": stored, "bob": hash_token("other")}


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("alice", "expected NAME HASH"),
        ("alice sha256:00", "is not a token hash"),
        ("group:ops " + hash_token("x"), "names a group"),
        (f"alice {hash_token('x')}\nalice {hash_token('y')}", "has a token already"),
    ],
)
def test_a_wrong_line_is_named(tmp_path: Path, line: str, words: str) -> None:
    path = tmp_path / "tokens"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match=words) as caught:
        read_tokens_file(path)
    assert f"auth.tokens_file {path}, line" in str(caught.value)


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot read auth\.tokens_file"):
        read_tokens_file(tmp_path / "missing")
    (tmp_path / "binary").write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match="not UTF-8"):
        read_tokens_file(tmp_path / "binary")


def test_a_file_others_may_write_is_refused_and_one_they_may_read_warned_of(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"bob {hash_token('b')}\n")
    configured = {"alice": hash_token("a")}
    path.chmod(0o600)
    book, warnings = load_tokens(configured, path)
    assert (book.principal_of("a"), book.principal_of("b"), warnings) == ("alice", "bob", [])
    path.chmod(0o644)
    _, warnings = load_tokens(configured, path)
    assert len(warnings) == 1
    assert "can be read by other users" in warnings[0]
    path.chmod(0o666)
    with pytest.raises(ValueError, match="can be written by other users"):
        load_tokens(configured, path)
    book, warnings = load_tokens(configured, None)
    assert (book.principal_of("a"), warnings) == ("alice", [])


#: A user id other than the tests' (no account of the machine has it, as a rule).
STRANGER = 54321


def test_a_file_another_user_owns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"bob {hash_token('b')}\n")
    path.chmod(0o600)
    book, _ = load_tokens({}, path)  # owned by the daemon's user
    assert book.principal_of("b") == "bob"
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    os.chown(path, STRANGER, -1)
    with pytest.raises(ValueError) as caught:
        load_tokens({}, path)
    me = pwd.getpwuid(os.geteuid()).pw_name
    try:
        owner = f"{pwd.getpwuid(STRANGER).pw_name} (uid {STRANGER})"
    except KeyError:
        owner = f"uid {STRANGER}"
    assert str(caught.value) == (
        f"auth.tokens_file {path} is owned by {owner}, neither the daemon's user "
        f"({me} (uid {os.geteuid()})) nor root, and its owner may rewrite it, adding tokens "
        f"of their own: give it to the daemon's user (chown {me} {path}) or to root"
    )


def test_a_name_with_two_tokens_or_a_token_with_two_names_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"bob {hash_token('b')}\nalice {hash_token('a')}\n")
    path.chmod(0o600)
    # The same token in both places is not a conflict.
    book, _ = load_tokens({"alice": hash_token("a")}, path)
    assert (book.principal_of("a"), book.principal_of("b")) == ("alice", "bob")
    with pytest.raises(ValueError, match=r"'alice' has one token in auth\.tokens and another"):
        load_tokens({"alice": hash_token("other")}, path)
    # Bob's token under alice's name would let bob act as alice.
    with pytest.raises(ValueError, match="'alice' and 'bob' have the same token"):
        load_tokens({"carol": hash_token("c")}, _written(tmp_path, "bob a", "alice a"))
    with pytest.raises(ValueError, match="'alice' and 'carol' have the same token"):
        load_tokens({"alice": hash_token("x"), "carol": hash_token("x")}, None)


def _written(directory: Path, *lines: str) -> Path:
    """A tokens file of ``NAME TOKEN`` lines, each token stored as its hash."""
    path = directory / "more-tokens"
    path.write_text(
        "".join(f"{name} {hash_token(token)}\n" for name, token in map(str.split, lines))
    )
    path.chmod(0o600)
    return path
