"""Why a peer connection ended, in words (``qmgr.server.peering.close_reasons``)."""

from __future__ import annotations

import errno
import os

import pytest
import structlog
import trio

from qmgr.server.peering.close_reasons import PeerClosed, close_reason, unopened


def broken(cause: BaseException) -> trio.BrokenResourceError:
    """A broken stream as trio raises it, from the system's error."""
    try:
        raise trio.BrokenResourceError(f"socket connection broken: {cause}") from cause
    except trio.BrokenResourceError as exc:
        return exc


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            broken(ConnectionResetError(errno.ECONNRESET, os.strerror(errno.ECONNRESET))),
            f"connection lost: {os.strerror(errno.ECONNRESET)}",
        ),
        (
            trio.ClosedResourceError("this stream was closed"),
            "connection lost: this stream was closed",
        ),
        (trio.ClosedResourceError(), "connection lost: ClosedResourceError"),
        (PeerClosed("the peer closed the connection"), "the peer closed the connection"),
    ],
)
def test_a_lost_connection_says_what_broke_in_words(error: BaseException, reason: str) -> None:
    assert close_reason(error, structlog.get_logger()) == reason


def test_a_bug_is_an_internal_error_and_is_logged() -> None:
    with structlog.testing.capture_logs() as logs:
        reason = close_reason(RuntimeError("oops"), structlog.get_logger())
    assert reason == "internal error: RuntimeError('oops')"
    assert [e["event"] for e in logs] == ["peer_connection_crashed"]


@pytest.mark.parametrize(
    "reason",
    ["the peer closed the connection", f"connection lost: {os.strerror(errno.ECONNRESET)}"],
)
def test_a_session_the_peer_ends_before_it_opens_points_at_its_log(reason: str) -> None:
    """A refusal (``peers.accept_from``, TLS) closes the connection, often with unread
    bytes (a reset): the connecting side says where the reason is."""
    said = unopened(reason)
    assert said.startswith(f"{reason} before the session opened: the peer may refuse")
    assert said.endswith("its log says why (peer_refused)")
    assert unopened("protocol error: x") == "protocol error: x"
    # A TLS handshake the peer cut short without a word of TLS: as a refusal.
    cut = unopened("TLS handshake failed: the connection was closed", closed=True)
    assert cut.endswith("its log says why (peer_refused)")
    assert unopened("TLS handshake failed: certificate verify failed") == (
        "TLS handshake failed: certificate verify failed"
    )
