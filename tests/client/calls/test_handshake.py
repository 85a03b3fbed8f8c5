"""The handshake call: Hello (with the client's name), the daemon's identity, a token."""

from __future__ import annotations

import uuid

import pytest
from client_kit import ADDRESS, error, new_protocol, run_call

from qmgr.client import ConnectionLost, InvalidArgument, NotSupported, ShuttingDown
from qmgr.client.calls.handshake import handshake
from wire import client as cf

GUID = uuid.UUID(int=3)
HELLO_OK = cf.HelloOk(version=cf.PROTOCOL_VERSION, qm_name="qm", qm_guid=GUID, server_version="1.0")


def test_hello_gives_the_identity_and_the_version() -> None:
    proto = new_protocol()
    run = run_call(handshake, "n" * 300, None, answers=[HELLO_OK], proto=proto)
    assert run.result == ("qm", GUID, "1.0")
    [hello] = run.requests
    assert isinstance(hello, cf.Hello)
    assert hello.client_name == "n" * 200
    assert proto.version == cf.PROTOCOL_VERSION


def test_a_token_is_sent_right_after_the_hello() -> None:
    run = run_call(handshake, "me", "secret", answers=[HELLO_OK, cf.Ok()])
    assert run.requests[1:] == [cf.Authenticate(token="secret")]


def test_a_token_needs_a_daemon_that_knows_tokens() -> None:
    old = cf.HelloOk(version=cf.SECURITY_VERSION - 1, qm_name="", qm_guid=GUID, server_version="")
    with pytest.raises(NotSupported, match="tokens and queue permissions needs"):
        run_call(handshake, "me", "secret", answers=[old])


def test_a_refusal_names_the_address() -> None:
    with pytest.raises(
        ShuttingDown, match=f"the queue manager at {ADDRESS} refused the connection"
    ):
        run_call(handshake, "me", None, answers=[error(cf.ErrorCode.SHUTTING_DOWN, "stopping")])


def test_a_lost_handshake_names_the_address() -> None:
    with pytest.raises(ConnectionLost, match=f"handshake with the queue manager at {ADDRESS}"):
        run_call(handshake, "me", None, answers=[ConnectionLost("reset")])


def test_an_answer_that_is_not_hello_ok_is_not_a_qmgr_daemon() -> None:
    with pytest.raises(ConnectionLost, match="answered Ok to Hello; is it a qmgr daemon"):
        run_call(handshake, "me", None, answers=[cf.Ok()])


def test_a_name_that_cannot_be_sent_fails_the_handshake() -> None:
    with pytest.raises(InvalidArgument, match="refused the connection: cannot send this request"):
        run_call(handshake, "\ud800", None)
