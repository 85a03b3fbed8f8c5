"""``/metrics`` and ``/healthz`` of a real daemon after known traffic: sends,
receives, an abort, a dead letter, a prepared transaction, a message for a peer that
is not running, a refused request and a refused token; the values read back with
``prometheus_client``'s parsers, in both formats."""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable

import pytest
from helpers import DaemonProcess, auth_required, free_port, settings
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families as parse_text

from qmgr import __version__
from qmgr.client import AccessDenied, connect

TOKENS = {"app": "app-token", "prom": "prom-token", "root": "root-token"}
OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def get(
    daemon: DaemonProcess, path: str, token: str | None = None, accept: str = ""
) -> tuple[int, str, str]:
    """Status, content type and body of one request to the daemon's HTTP listener."""
    client = http.client.HTTPConnection("127.0.0.1", daemon.http_port, timeout=10)
    headers = {"Accept": accept} if accept else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        client.request("GET", path, headers=headers)
        response = client.getresponse()
        return response.status, response.getheader("content-type") or "", response.read().decode()
    finally:
        client.close()


def samples(text: str, parse: Callable[[str], object] = parse_text) -> dict[str, float]:
    """Every sample as ``name{labels}`` (labels sorted) -> value."""
    found = {}
    for family in parse(text):  # type: ignore[attr-defined]
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}"] = sample.value
    return found


def test_a_scrape_after_known_traffic(daemon_factory: Callable[..., DaemonProcess]) -> None:
    daemon = daemon_factory(
        name="qm-metrics",
        extra_args=[*auth_required(TOKENS, admins=["root"]), *settings('auth.monitors=["prom"]')],
    )
    # Nobody listens there: the message waits in its outgoing queue, the link down.
    stopped_peer = f"127.0.0.1:{free_port()}"
    with connect(daemon.address, token=TOKENS["app"]) as qm:
        qm.create_queue("orders", transactional=True)
        qm.create_queue("plain")
        with connect(daemon.address, token=TOKENS["root"]) as root:
            root.create_list("fanout", ["orders", "plain"])  # lists are administrators'
        with qm.begin() as tx:
            for body in (b"1", b"2", b"3"):
                tx.send("orders", body)
        with qm.begin() as tx:
            assert tx.receive("orders", timeout=5) is not None
        # Both copies in one commit; the one for the non-transactional queue is
        # refused there and kept in system$;deadxact.
        with qm.begin() as tx:
            tx.send("DL=fanout", b"to both")
        aborted = qm.begin()
        assert aborted.receive("orders", timeout=5) is not None
        aborted.abort()
        prepared = qm.begin(xid="in-doubt")
        prepared.send("orders", b"prepared")
        prepared.prepare()
        qm.send(f"DIRECT=TCP:{stopped_peer}\\private$\\far", b"waiting")
        with pytest.raises(AccessDenied):  # only administrators control outgoing queues
            qm.purge_outgoing(f"DIRECT=TCP:{stopped_peer}\\private$\\far")
        held = qm.begin()
        assert held.receive("orders", timeout=5) is not None  # open while we scrape
        status = qm.status()

        assert get(daemon, "/healthz")[:1] == (200,)
        assert get(daemon, "/metrics")[0] == 401
        assert get(daemon, "/metrics", "wrong-token")[0] == 401
        assert get(daemon, "/metrics", TOKENS["app"])[0] == 403
        code, content_type, text = get(daemon, "/metrics", TOKENS["prom"])
        assert code == 200
        assert content_type.startswith("text/plain; version=0.0.4")
        found = samples(text)
        code, content_type, om_text = get(daemon, "/metrics", TOKENS["prom"], OPENMETRICS)
        assert content_type.startswith("application/openmetrics-text; version=1.0.0")
        om_found = samples(om_text, parse_openmetrics)
        held.abort()

    orders = '{queue="orders"}'
    # 3 sent, 1 received, 1 copy from the list; one held by the open transaction.
    assert found[f"qmgr_queue_messages{orders}"] == 3
    assert found[f"qmgr_queue_locked_messages{orders}"] == 1
    assert found[f"qmgr_queue_messages_added_total{orders}"] == 4
    assert found[f"qmgr_queue_messages_removed_total{orders}"] == 1
    assert found[f"qmgr_queue_bytes{orders}"] > 0
    assert 0 <= found[f"qmgr_queue_oldest_message_age_seconds{orders}"] < 60
    assert found['qmgr_queue_messages{queue="orders;journal"}'] == 0
    assert found['qmgr_queue_messages{queue="system$;deadxact"}'] == 1
    assert (
        found['qmgr_dead_letters_total{class="NACK_NOT_TRANSACTIONAL_Q",queue="system$;deadxact"}']
        == 1
    )
    # The same counters as qmgr status (read just before the scrape).
    assert found["qmgr_commits_total{}"] == status.commits
    assert found["qmgr_aborts_total{}"] == status.aborts == 1
    assert found["qmgr_synced_writes_total{}"] >= status.batches
    assert found["qmgr_sync_seconds_count{}"] == found["qmgr_synced_writes_total{}"]
    assert found["qmgr_open_transactions{}"] == 1
    assert found["qmgr_prepared_transactions{}"] == 1
    assert 0 <= found["qmgr_prepared_transaction_oldest_age_seconds{}"] < 60
    assert found["qmgr_uncommitted_bytes{}"] == 0
    assert found['qmgr_connections{kind="client"}'] == 1
    assert found['qmgr_connections{kind="http"}'] == 1
    assert found['qmgr_connections{kind="peer"}'] == 0
    destination = f"DIRECT=TCP:{stopped_peer}\\private$\\far"
    far = f'{{destination="{destination}",next_hop="{stopped_peer}"}}'
    assert found[f"qmgr_outgoing_messages{far}"] == 1
    assert found[f"qmgr_outgoing_unacknowledged_messages{far}"] == 0
    assert found[f"qmgr_peer_link_up{far}"] == 0
    assert found[f"qmgr_outgoing_paused{far}"] == 0
    assert 0 <= found[f"qmgr_outgoing_oldest_message_age_seconds{far}"] < 60
    # The purge refused on the client port, then the 401 without a token and the
    # 403 for app on the HTTP listener.
    assert found["qmgr_access_denied_total{}"] == 3
    assert found["qmgr_authentication_failures_total{}"] == 1
    assert 0 < found["qmgr_store_used_bytes{}"] < found["qmgr_store_limit_bytes{}"]
    assert found["qmgr_disk_free_bytes{}"] > 0
    guid = str(status.qm_guid)
    build = f'qmgr_build_info{{guid="{guid}",name="qm-metrics",version="{__version__}"}}'
    assert found[build] == 1
    assert found["process_resident_memory_bytes{}"] > 0
    assert found["process_open_fds{}"] > 0
    # Nothing came from a peer: every refusal class is there, at 0 (increase() sees the first).
    refused = {
        key: value for key, value in found.items() if key.startswith("qmgr_incoming_rejected")
    }
    assert refused
    assert set(refused.values()) == {0}
    assert found['qmgr_incoming_rejected_total{class="NACK_BAD_DST_Q"}'] == 0
    # OpenMetrics carries the same samples (a counter's family is named without _total).
    for key in (
        f"qmgr_queue_messages{orders}",
        f"qmgr_queue_messages_added_total{orders}",
        "qmgr_commits_total{}",
        f"qmgr_outgoing_messages{far}",
    ):
        assert om_found[key] == found[key], key


def test_healthz_follows_the_daemon(daemon: DaemonProcess) -> None:
    assert get(daemon, "/healthz") == (200, "text/plain; charset=utf-8", "ok\n")
    assert get(daemon, "/nowhere")[0] == 404
    assert get(daemon, "/metrics?access_token=x")[0] == 400
    # Without auth.required the metrics are open, like every request on the client port.
    assert get(daemon, "/metrics")[0] == 200
    daemon.stop()
    deadline = time.monotonic() + 10
    while True:
        try:
            get(daemon, "/healthz")
        except OSError:
            break  # the listener is closed with the daemon
        assert time.monotonic() < deadline
