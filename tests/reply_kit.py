"""Large replies, for the tests of the client protocol's limits on whole lists."""

from __future__ import annotations

from wire import client as cf


def long_queue_list(count: int) -> tuple[cf.QueueInfo, ...]:
    """``count`` queues with 120-character names: 20,000 take over 4 MiB in a
    reply, 300,000 over 64 MiB."""
    one = cf.QueueInfo(
        name="q" * 120,
        format_name=".\\private$\\" + "q" * 120,
        kind=int(cf.QueueKind.NORMAL),
        transactional=True,
        journal=False,
        quota=None,
        depth=0,
        bytes=0,
        locked=0,
        created_at=1_600_000_000.0,
    )
    return (one,) * count
