"""Client tokens: how they are made, stored hashed, and checked in constant time.

A token is a random secret (32 bytes, URL-safe base64) given to one client;
the queue manager keeps only its SHA-256, written ``sha256:<hex>`` in
``auth.tokens`` or in the file ``auth.tokens_file`` (one ``NAME HASH`` per
line). A plain SHA-256 is enough because a token is random and long: there
is nothing to guess from its hash (a password would need a slow hash; a
token is not one). Checking a token hashes it once and compares the digest
with every stored one with ``hmac.compare_digest``, so the time taken does
not depend on which, if any, matched.

Who may have a token is :func:`token_name_problem`'s to say, for the daemon
reading ``auth.tokens`` and the tokens file and for ``qmgr auth token``
writing them: a client's name (``permissions.user_name_problem``, as for a
client certificate), and in the file, one its ``NAME HASH`` lines can hold.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pwd
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from wire import quoted

from .permissions import user_name_problem

__all__ = [
    "HASH_PREFIX",
    "TokenBook",
    "hash_token",
    "load_tokens",
    "new_token",
    "parse_hash",
    "read_tokens_file",
    "token_name_problem",
]

#: The only hash kept: ``sha256:`` and 64 hex digits.
HASH_PREFIX: Final = "sha256:"
#: Longest token accepted (a bound on what a client can make the daemon hash).
MAX_TOKEN_CHARS: Final = 512


def token_name_problem(name: str, *, in_file: bool) -> str | None:
    """Why ``name`` cannot have a token, or None: it is not a client's name
    (``user_name_problem``: empty, control characters, a group, a peer or
    ``everyone``), or is not text a UTF-8 file can hold; ``in_file``: a line of
    the tokens file (``NAME HASH``, ``#`` starting a comment) cannot hold it
    either, for a space or a ``#`` in it."""
    problem = user_name_problem(name)
    if problem is not None:
        return problem
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return f"{quoted(name)} is not text (it cannot be written in UTF-8)"
    if in_file and any(ch.isspace() or ch == "#" for ch in name):
        return (
            f"{quoted(name)} has a space or a '#', which a line of the tokens file "
            "(NAME HASH, '#' starting a comment) cannot hold"
        )
    return None


def new_token() -> str:
    """A new random token (43 URL-safe characters, 256 bits)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored form of ``token``: ``sha256:<hex>``."""
    return HASH_PREFIX + hashlib.sha256(token.encode()).hexdigest()


def parse_hash(text: str) -> bytes:
    """The digest of a stored hash.

    Raises:
        ValueError: it is not ``sha256:`` and 64 hex digits.
    """
    text = text.strip()
    digest = text[len(HASH_PREFIX) :]
    if not text.startswith(HASH_PREFIX) or len(digest) != 64:
        msg = f"{text[:20]!r}... is not a token hash (sha256: and 64 hex digits; qmgr auth token)"
        raise ValueError(msg)
    try:
        return bytes.fromhex(digest)
    except ValueError:
        msg = "a token hash has a character that is not a hex digit"
        raise ValueError(msg) from None


def read_tokens_file(path: Path) -> dict[str, str]:
    """The ``NAME HASH`` lines of a tokens file (``#`` starts a comment).

    Raises:
        ValueError: the file cannot be read, or a line is not ``NAME HASH``
            with a well-formed hash (the message names the file and line).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        msg = f"cannot read auth.tokens_file {path}: {reason}"
        raise ValueError(msg) from exc
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        where = f"auth.tokens_file {path}, line {number}"
        if len(parts) != 2:
            msg = f"{where}: expected NAME HASH (qmgr auth token NAME --file {path})"
            raise ValueError(msg)
        try:
            parse_hash(parts[1])
        except ValueError as exc:
            msg = f"{where}: {exc}"
            raise ValueError(msg) from None
        problem = token_name_problem(parts[0], in_file=True)
        if problem is not None:
            msg = f"{where}: {problem}"
            raise ValueError(msg)
        if parts[0] in found:
            msg = f"{where}: {quoted(parts[0])} has a token already"
            raise ValueError(msg)
        found[parts[0]] = parts[1]
    return found


def load_tokens(configured: Mapping[str, str], path: Path | None) -> tuple[TokenBook, list[str]]:
    """The tokens of ``auth.tokens`` (already checked) and of the file
    ``auth.tokens_file``, and warnings about the file (one that other users
    can read).

    Raises:
        ValueError: the file cannot be read, a line of it is wrong, other
            users may write it or own it (they could add a token), a name has another
            token in the file than in ``auth.tokens``, or two names have one token.
    """
    hashes = dict(configured)  # checked with the configuration
    warnings: list[str] = []
    if path is not None:
        try:
            found = path.stat()
        except OSError as exc:
            msg = f"cannot read auth.tokens_file {path}: {exc.strerror}"
            raise ValueError(msg) from exc
        mode = stat.S_IMODE(found.st_mode)
        if mode & 0o022:
            msg = (
                f"auth.tokens_file {path} can be written by other users (mode {mode:04o}), "
                f"who could add tokens of their own: chmod 600 {path}"
            )
            raise ValueError(msg)
        _check_owner(path, found.st_uid)
        if mode & 0o044:
            warnings.append(
                f"auth.tokens_file {path} can be read by other users (mode {mode:04o}); "
                f"chmod 600 {path}"
            )
        for name, text in read_tokens_file(path).items():
            if name in hashes and parse_hash(hashes[name]) != parse_hash(text):
                msg = (
                    f"{quoted(name)} has one token in auth.tokens and another in auth.tokens_file "
                    f"{path}: keep one"
                )
                raise ValueError(msg)
            hashes[name] = text
    _check_one_name_per_token(hashes)
    return TokenBook(hashes), warnings


def _check_owner(path: Path, owner: int) -> None:
    """Refuse a tokens file owned by a user other than the daemon's (its
    effective user) or root: its owner may rewrite it whatever its mode.

    Raises:
        ValueError: another user owns it (the message says how to give it over).
    """
    user = os.geteuid()
    if owner in (user, 0):
        return
    msg = (
        f"auth.tokens_file {path} is owned by {_user_name(owner)}, neither the daemon's "
        f"user ({_user_name(user)}) nor root, and its owner may rewrite it, adding tokens of "
        f"their own: give it to the daemon's user (chown {_user_name(user, bare=True)} {path}) "
        "or to root"
    )
    raise ValueError(msg)


def _user_name(uid: int, *, bare: bool = False) -> str:
    """``name (uid N)``, or the name alone with ``bare`` (the uid when the user has
    no name)."""
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid) if bare else f"uid {uid}"
    return name if bare else f"{name} (uid {uid})"


def _check_one_name_per_token(hashes: Mapping[str, str]) -> None:
    """Refuse two names with one token: whoever holds it would be either.

    Raises:
        ValueError: two names share a hash.
    """
    seen: dict[bytes, str] = {}
    for name, text in sorted(hashes.items()):
        digest = parse_hash(text)
        other = seen.setdefault(digest, name)
        if other != name:
            msg = (
                f"{quoted(other)} and {quoted(name)} have the same token (the same hash): "
                "give each name a token of its own (qmgr auth token NAME)"
            )
            raise ValueError(msg)


class TokenBook:
    """The tokens a queue manager accepts, by principal name."""

    def __init__(self, hashes: Mapping[str, str]) -> None:
        self._digests = [(name, parse_hash(text)) for name, text in sorted(hashes.items())]

    def __bool__(self) -> bool:
        return bool(self._digests)

    def principal_of(self, token: str) -> str | None:
        """The name ``token`` belongs to, or None; in time independent of which."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        digest = hashlib.sha256(token.encode()).digest()
        found = None
        for name, stored in self._digests:
            if hmac.compare_digest(digest, stored) and found is None:
                found = name
        return found
