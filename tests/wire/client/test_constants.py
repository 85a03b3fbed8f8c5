"""The protocol's versions, codes and limits."""

from __future__ import annotations

from wire import client as cf


def test_versions_and_codes() -> None:
    assert (cf.MIN_PROTOCOL_VERSION, cf.PROTOCOL_VERSION) == (2, 10)
    assert (cf.TWO_PHASE_VERSION, cf.OUTCOMES_VERSION, cf.POISON_VERSION) == (3, 4, 5)
    assert (cf.SECURITY_VERSION, cf.ROUTING_VERSION, cf.CANCEL_VERSION) == (6, 7, 8)
    assert (cf.LARGE_LISTS_VERSION, cf.QUOTA_VERSION) == (9, 10)
    hello = cf.Hello()
    assert (hello.min_version, hello.max_version) == (2, 10)
    assert int(cf.ErrorCode.TRANSACTION_COMMITTED) == 19
    assert [int(r) for r in cf.Resolution] == [1, 2, 3, 4]
    assert [int(s) for s in cf.TransactionState] == [1, 2, 3]
    assert cf.MAX_RESOLVE_XIDS == 10_000


def test_limits() -> None:
    assert cf.MAX_MESSAGE_BODY == 4 * 1024 * 1024
    assert cf.MAX_LABEL_CHARS == 250
    assert cf.MAX_FRAME_BODY == cf.MAX_MESSAGE_BODY + 64 * 1024
    assert cf.MAX_LIST_FRAME_BODY == 64 * 1024 * 1024
    assert cf.CORRELATION_ID_SIZE == 20
