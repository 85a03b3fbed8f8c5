"""A loop between routers (R1's next hop for X is R2, and R2's is R1) cannot be seen
from one of them: each relay counts a hop, and past the limit the message is kept
in a dead-letter queue with NACK_HOP_COUNT_EXCEEDED and an event, never lost, and
kept once although its source sends it again and again (only the destination,
which it never reaches, could end that with an OrderAck)."""

from __future__ import annotations

from collections.abc import Callable

from helpers import (
    PEER_FAST,
    ROUTER,
    DaemonProcess,
    drain,
    free_port,
    log_events,
    settings,
    wait_until,
)

from qmgr.client import connect


def test_a_loop_between_routers_ends_in_a_dead_letter_queue(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    nowhere = free_port()  # X: no queue manager listens there
    r1_port, r2_port = free_port(), free_port()
    r1 = daemon_factory(
        name="qm-r1",
        extra_args=(
            "--listen",
            f"127.0.0.1:{r1_port}",
            *PEER_FAST,
            *ROUTER,
            *settings(f'routes."127.0.0.1:{nowhere}"="127.0.0.1:{r2_port}"'),
        ),
    )
    r2 = daemon_factory(
        name="qm-r2",
        extra_args=(
            "--listen",
            f"127.0.0.1:{r2_port}",
            *PEER_FAST,
            *ROUTER,
            *settings(f'routes."127.0.0.1:{nowhere}"="127.0.0.1:{r1_port}"'),
        ),
    )
    with connect(r1.address) as q1:
        with q1.begin() as tx:
            tx.send(f"DIRECT=TCP:127.0.0.1:{nowhere}\\private$\\orders", b"round and round")
            tx.commit()

        def kept() -> list[DaemonProcess]:
            return [
                qm
                for qm in (r1, r2)
                if [body for _, body in drain(qm.address, "system$;deadxact")]
                == [b"round and round"]
            ]

        wait_until(lambda: len(kept()) == 1, 60)
        (holder,) = kept()
        # The source resends every second (PEER_FAST): each resend goes round
        # again and is dropped as a duplicate where it was kept.
        wait_until(lambda: _resends(r1) >= 3, 60)
        assert len(kept()) == 1
        assert [body for _, body in drain(holder.address, "system$;deadxact")] == [
            b"round and round"
        ]
        rejected = log_events(holder, "message_rejected")
        assert [e["message_class"] for e in rejected] == ["NACK_HOP_COUNT_EXCEEDED"]
        # The source keeps its copy (only an OrderAck of the destination ends it).
        (outgoing,) = q1.outgoing()
        assert outgoing.unacknowledged + outgoing.waiting >= 1


def _resends(daemon: DaemonProcess) -> int:
    """Times the source sent its transactional messages again after an OrderAck wait."""
    return len(log_events(daemon, "order_ack_wait_expired"))
