"""The start-up check of ``server.aliases``: each alias is tried as a next hop
would be, and the log says whether it reached another queue manager or nobody;
it sends nothing and changes nothing. (An alias that reaches this queue
manager itself is confirmed: ``tests/integration/test_addresses_between_processes.py``
checks that with real daemons, which listen before they check.)"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import structlog
import trio
import trio.testing
from peer_kit import Network, wait_until

_VERDICTS = ("alias_confirmed", "alias_names_another_queue_manager", "alias_not_checked")


def _verdicts(logs: list[MutableMapping[str, Any]]) -> dict[str, MutableMapping[str, Any]]:
    return {entry["alias"]: entry for entry in logs if entry["event"] in _VERDICTS}


async def test_an_alias_of_another_queue_manager_is_an_error_and_one_of_nobody_is_not_checked(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    other = await network.start("qm-b", 1902)
    with structlog.testing.capture_logs() as logs:
        a = await network.start(
            "qm-a", 1901, ['server.aliases=["127.0.0.1:1902", "127.0.0.1:1999"]']
        )
        await wait_until(lambda: len(_verdicts(logs)) == 2, what="every alias checked")
    verdicts = _verdicts(logs)
    another = verdicts["127.0.0.1:1902"]
    assert another["event"] == "alias_names_another_queue_manager"
    assert another["log_level"] == "error"
    assert another["remote_qm"] == str(other.store.qm_guid)
    assert "remove it from server.aliases" in another["advice"]
    nobody = verdicts["127.0.0.1:1999"]
    assert nobody["event"] == "alias_not_checked"
    assert nobody["log_level"] == "info"
    assert "cannot connect" in nobody["reason"]
    # Nothing was sent, and the session the check opened is closed again.
    assert not a.store.outgoing_states()
    assert not other.store.incoming_states()
    await wait_until(lambda: other.peering.sessions() == 0, what="the session closed")
