"""The console's pages and actions against a real daemon with ``auth.required``,
with the standard library's HTTP client as the browser: an outgoing queue to a
stopped peer paused, resumed and purged after its confirmation; a prepared
transaction committed by its xid; the lists and the queues pages; each action
seen by the SDK and logged with its principal."""

from __future__ import annotations

import http.client
import re
from collections.abc import Callable
from urllib.parse import urlencode

from helpers import DaemonProcess, auth_required, free_port, log_events

from qmgr.client import connect

TOKENS = {"root": "root-token", "app": "app-token"}


class Browser:
    """A cookie jar over ``http.client``: what a browser does with the console."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.cookie = ""

    def request(
        self, method: str, path: str, form: dict[str, str] | None = None
    ) -> tuple[int, str, dict[str, str]]:
        client = http.client.HTTPConnection("127.0.0.1", self.daemon.http_port, timeout=10)
        headers = {"Cookie": f"qmgr_console={self.cookie}"} if self.cookie else {}
        body = None
        if form is not None:
            body = urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            headers["Origin"] = f"http://127.0.0.1:{self.daemon.http_port}"
        try:
            client.request(method, path, body=body, headers=headers)
            response = client.getresponse()
            found = re.search(r"qmgr_console=([^;]*);", response.getheader("set-cookie") or "")
            if found is not None:
                self.cookie = found.group(1)
            return response.status, response.read().decode(), dict(response.getheaders())
        finally:
            client.close()

    def page(self, path: str) -> str:
        status, text, _ = self.request("GET", path)
        assert status == 200, text
        return text

    def act(self, path: str, **fields: str) -> int:
        token = re.search(r'name="csrf" value="([^"]+)"', self.page("/console/queues"))
        assert token is not None
        status, text, _ = self.request("POST", path, {"csrf": token.group(1), **fields})
        assert status in (303, 403), text
        return status


def test_outgoing_queues_and_transactions_in_doubt_from_the_console(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(
        name="qm-console-ops", extra_args=auth_required(TOKENS, admins=["root"])
    )
    far = f"DIRECT=TCP:127.0.0.1:{free_port()}\\private$\\far"  # nobody listens there
    browser = Browser(daemon)
    assert browser.request("POST", "/console/login", {"token": TOKENS["root"]})[0] == 303
    with connect(daemon.address, token=TOKENS["root"]) as qm:
        qm.create_queue("orders", transactional=True)
        qm.send(far, b"waiting")
        qm.create_list("everyone", [".\\private$\\orders"])
        prepared = qm.begin(xid="console-in-doubt")
        prepared.send("orders", b"prepared")
        prepared.prepare()

        page = browser.page("/console/outgoing")
        assert "far" in page
        assert (
            browser.act("/console/outgoing/control", destination=far.lower(), action="pause") == 303
        )
        assert [o.state for o in qm.outgoing()] == ["paused"]
        assert "paused" in browser.page("/console/outgoing")
        assert (
            browser.act("/console/outgoing/control", destination=far.lower(), action="resume")
            == 303
        )
        assert [o.state for o in qm.outgoing()] != ["paused"]
        confirm = browser.page("/console/outgoing/purge?" + urlencode({"destination": far.lower()}))
        assert "remove its 1 messages" in confirm
        assert (
            browser.act("/console/outgoing/purge", destination=far.lower(), action="purge") == 303
        )
        assert "1 message purged" in browser.page("/console/outgoing")
        assert [o.waiting for o in qm.outgoing()] in ([], [0])

        assert "console-in-doubt" in browser.page("/console/transactions")
        assert (
            browser.act("/console/transactions/resolve", xid="console-in-doubt", decision="commit")
            == 303
        )
        assert "console-in-doubt: committed" in browser.page("/console/transactions")
        assert [m.body for m in qm.peek_range("orders", after=0, max=10)] == [b"prepared"]

        assert "everyone" in browser.page("/console/lists")
        assert "orders" in browser.page("/console/queues?filter=ord")

    actions = log_events(daemon, "console_action")
    assert [e["action"] for e in actions] == [
        "outgoing_pause",
        "outgoing_resume",
        "outgoing_purge",
        "commit",
    ]
    assert {e["principal"] for e in actions} == {"root"}

    # A principal that may not control outgoing queues is refused.
    other = Browser(daemon)
    assert other.request("POST", "/console/login", {"token": TOKENS["app"]})[0] == 303
    assert other.act("/console/outgoing/control", destination=far.lower(), action="pause") == 403
