"""Client tokens: how they are made, stored hashed, and checked in constant time.

A token is a random secret (32 bytes, URL-safe base64) given to one client;
the queue manager keeps only its SHA-256, written ``sha256:<hex>`` in
``auth.tokens`` or in the file ``auth.tokens_file`` (one ``NAME HASH`` per
line). A plain SHA-256 is enough because a token is random and long: there
is nothing to guess from its hash (a password would need a slow hash; a
token is not one). Checking a token hashes it once and compares the digest
with every stored one with ``hmac.compare_digest``, so the time taken does
not depend on which, if any, matched.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = ["HASH_PREFIX", "TokenBook", "hash_token", "new_token", "parse_hash", "read_tokens_file"]

#: The only hash kept: ``sha256:`` and 64 hex digits.
HASH_PREFIX: Final = "sha256:"
#: Longest token accepted (a bound on what a client can make the daemon hash).
MAX_TOKEN_CHARS: Final = 512


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
        ValueError: the file cannot be read or a line is not ``NAME HASH``.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"cannot read auth.tokens_file {path}: {exc.strerror}"
        raise ValueError(msg) from exc
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            msg = f"{path}:{number}: expected NAME HASH"
            raise ValueError(msg)
        found[parts[0]] = parts[1]
    return found


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
