"""The JSON API of a real daemon with ``auth.required``, with the standard
library's HTTP client: status, a queue's messages in pages, a move into
``;poison`` and back, a purge, an outgoing queue to a stopped peer paused and
resumed, a prepared transaction committed by its xid, and the refusals of a
principal without the right; each answer compared with what the SDK says."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from typing import Any

from helpers import DaemonProcess, auth_required, free_port

from qmgr.client import Message, connect
from qmgr.client.shapes import message_json, queue_json

TOKENS = {"app": "app-token", "root": "root-token"}


def call(
    daemon: DaemonProcess, method: str, path: str, token: str, body: Any = None
) -> tuple[int, Any]:
    """Status and JSON of one request to the daemon's API, as ``token``'s principal."""
    client = http.client.HTTPConnection("127.0.0.1", daemon.http_port, timeout=10)
    headers = {"Authorization": f"Bearer {TOKENS[token]}", "Content-Type": "application/json"}
    data = None if body is None else json.dumps(body)
    try:
        client.request(method, path, body=data, headers=headers)
        response = client.getresponse()
        assert response.getheader("content-type") == "application/json"
        return response.status, json.loads(response.read())
    finally:
        client.close()


def test_the_api_flow_of_an_operator(daemon_factory: Callable[..., DaemonProcess]) -> None:
    daemon = daemon_factory(name="qm-api", extra_args=[*auth_required(TOKENS, admins=["root"])])
    far = f"DIRECT=TCP:127.0.0.1:{free_port()}\\private$\\far"  # nobody listens there
    with connect(daemon.address, token=TOKENS["root"]) as qm:
        qm.create_queue("orders", transactional=True)
        with qm.begin() as tx:
            for body in (b"1", b"2", b"3"):
                tx.send("orders", body)
        prepared = qm.begin(xid="api-in-doubt")
        prepared.send("orders", b"prepared")
        prepared.prepare()
        qm.send(far, b"waiting")

        code, status = call(daemon, "GET", "/api/v1/status", "app")
        assert code == 200
        assert status["qm_name"] == "qm-api"
        orders = next(q for q in qm.list_queues() if q.name == "orders")
        assert next(q for q in status["queues"] if q["name"] == "orders") == queue_json(orders)

        # A page of two, then the rest.
        code, page = call(daemon, "GET", "/api/v1/queues/orders/messages?max=2", "root")
        assert (code, len(page["messages"])) == (200, 2)
        after = page["next_after"]
        code, rest = call(daemon, "GET", f"/api/v1/queues/orders/messages?after={after}", "root")
        assert ([m["text_preview"] for m in rest["messages"]], rest["next_after"]) == (["3"], None)
        first = page["messages"][0]
        sdk: Message = qm.peek_range("orders", after=0, max=1)[0]
        assert {k: v for k, v in message_json(sdk).items() if not k.startswith("body")} == {
            k: v for k, v in first.items() if k in message_json(sdk) and not k.startswith("body")
        }

        # Into ;poison by lookup id, and back: one operation, the id kept.
        move = {"to": "orders;poison", "lookup_id": first["lookup_id"]}
        code, moved = call(daemon, "POST", "/api/v1/queues/orders/move", "root", move)
        assert (code, moved["count"]) == (200, 1)
        assert call(daemon, "POST", "/api/v1/queues/orders/purge", "app")[0] == 403
        back = {"to": "orders", "all": True}
        code, moved = call(daemon, "POST", "/api/v1/queues/orders;poison/move", "root", back)
        assert (code, moved["count"]) == (200, 1)
        code, page = call(daemon, "GET", "/api/v1/queues/orders/messages", "root")
        assert first["id"] in [m["id"] for m in page["messages"]]
        assert [m["move_count"] for m in page["messages"] if m["id"] == first["id"]] == [2]

        # The outgoing queue to the stopped peer: paused, then resumed.
        code, outgoing = call(daemon, "GET", "/api/v1/outgoing", "app")
        assert code == 200
        [queue] = outgoing
        assert queue["waiting"] == 1
        assert "alternates" in queue
        target = {"destination": queue["destination"]}
        code, refused = call(daemon, "POST", "/api/v1/outgoing/pause", "app", target)
        assert (code, refused["error"]["code"]) == (403, "access_denied")
        code, paused = call(daemon, "POST", "/api/v1/outgoing/pause", "root", target)
        assert (code, paused["outgoing"]["state"]) == (200, "paused")
        code, resumed = call(daemon, "POST", "/api/v1/outgoing/resume", "root", target)
        assert code == 200
        assert resumed["outgoing"]["state"] != "paused"
        code, incoming = call(daemon, "GET", "/api/v1/incoming", "app")
        assert (code, incoming) == (200, [])

        # The prepared transaction: listed, refused to another principal, committed.
        code, listed = call(daemon, "GET", "/api/v1/transactions", "root")
        assert (code, [t["xid"] for t in listed]) == (200, ["api-in-doubt"])
        xid = {"xid": "api-in-doubt"}
        code, refused = call(daemon, "POST", "/api/v1/transactions/commit", "app", xid)
        assert (code, refused["error"]["code"]) == (403, "access_denied")
        code, done = call(daemon, "POST", "/api/v1/transactions/commit", "root", xid)
        assert (code, done) == (200, {"xid": "api-in-doubt", "resolution": "committed"})

        # Purge: the three messages and the committed one.
        code, purged = call(daemon, "POST", "/api/v1/queues/orders/purge", "root")
        assert (code, purged) == (200, {"queue": "orders", "purged": 4})
        assert next(q for q in qm.list_queues() if q.name == "orders").depth == 0
