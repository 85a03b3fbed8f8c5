"""The packet values: what they say about themselves."""

from __future__ import annotations

import dataclasses

import wire

from .msmq_samples import express_message, transactional_message


def test_a_refused_connection_is_the_cs_flag() -> None:
    refusing = wire.InternalHeader(flags=wire.InternalFlags.CONNECTION_REFUSED)
    establish = wire.EstablishConnection(client_qm=wire.NULL_GUID, timestamp=0)
    parameters = wire.ConnectionParameters(recoverable_ack_timeout=500, ack_timeout=20_000)
    assert not establish.refused
    assert not parameters.refused
    assert dataclasses.replace(establish, internal=refusing).refused
    assert dataclasses.replace(parameters, internal=refusing).refused


def test_transactional_and_recoverable_messages() -> None:
    express = express_message()
    assert not express.is_transactional
    assert not express.is_recoverable
    message = transactional_message()
    assert message.is_transactional
    assert message.is_recoverable


def test_defaults_announce_no_ping_and_pad_with_0x5a() -> None:
    establish = wire.EstablishConnection(client_qm=wire.NULL_GUID, timestamp=0)
    assert establish.operating_system == 0x10 | wire.OperatingSystemFlags.NO_PING
    assert establish.padding == b"\x5a" * 512
    assert establish.server_qm == wire.NULL_GUID
