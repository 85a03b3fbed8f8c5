"""Raw pages of peek_range: the MessageList body, undecoded, for column readers."""

from __future__ import annotations

import dataclasses

import pytest
from fake_daemon import FakeDaemon
from wire_samples import QUEUED

from qmgr.client import QueueNotFound, connect
from qmgr.client._pages import page_body, request_page
from wire import client as cf

PAGE = cf.MessageList(messages=tuple(dataclasses.replace(QUEUED, lookup_id=n) for n in (4, 5)))


def test_a_page_is_the_body_of_its_message_list(fake_daemon: FakeDaemon) -> None:
    fake_daemon.canned[cf.PeekRange] = PAGE
    with connect(fake_daemon.address) as qm:
        first = request_page(qm, "q", 3, 100)
        second = request_page(qm, "q", 5, 100)  # asked before the first is read
        assert page_body(first) == page_body(second) == cf.encode_frame(1, PAGE)[12:]
        assert qm.peek_range("q", 3, 2)[1].lookup_id == 5  # later pages decode as usual
    assert fake_daemon.requests_of(cf.PeekRange)[:2] == [
        cf.PeekRange(queue="q", after=3, max_count=100),
        cf.PeekRange(queue="q", after=5, max_count=100),
    ]


def test_a_failed_page_raises_the_daemons_error(fake_daemon: FakeDaemon) -> None:
    fake_daemon.canned[cf.PeekRange] = cf.ErrorReply(
        code=int(cf.ErrorCode.QUEUE_NOT_FOUND), message="no 'q'"
    )
    with connect(fake_daemon.address) as qm:
        with pytest.raises(QueueNotFound, match="no 'q'"):
            page_body(request_page(qm, "q", 0, 10))
        assert not qm._conn.proto._reader.raw
