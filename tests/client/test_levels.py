"""Acknowledgment and journal levels, and the names of message classes."""

from __future__ import annotations

from qmgr.client import Acknowledge, Journal, MessageClass
from qmgr.client._levels import class_name


def test_levels_are_msmqs() -> None:
    assert Acknowledge.FULL_RECEIVE == 0x0E
    assert Acknowledge.NACK_REACH_QUEUE is Acknowledge.NEG_ARRIVAL
    assert Journal.DEADLETTER | Journal.JOURNAL == 3


def test_class_name() -> None:
    assert class_name(0xC002) == "NACK_RECEIVE_TIMEOUT"
    assert class_name(int(MessageClass.ACK_REACH_QUEUE)) == "ACK_REACH_QUEUE"
    assert class_name(0x1234) == "0x1234"
