"""The web console in a real headless browser (Debian's chromium and
chromium-driver, through Selenium's WebDriver) against a real daemon with
``auth.required``: an operator logs in with a token, watches a queue's depth
change without reloading, browses a message (its label shown as text), moves a
dead letter and a poisoned message back (each keeping its id), purges after
the confirmation, and a principal without the right is refused. The
screenshots of the overview and of a queue page are saved (into
``$QMGR_CONSOLE_SCREENSHOTS`` when set: ``docs/images`` keeps them).

Without chromium and chromium-driver the test is skipped, unless
``QMGR_REQUIRE_BROWSER`` is set (CI installs both and sets it): then it fails.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from helpers import DaemonProcess, auth_required, wait_until

from qmgr.client import Journal, connect

TOKENS = {"root": "root-console-token", "app": "app-console-token"}
#: Seconds a page has to show what changed (it refreshes every 2 s).
WITHIN = 15.0
DEADXACT = "system$;deadxact"

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def _binaries() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return None if browser is None or driver is None else (browser, driver)


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    found = _binaries()
    if found is None:
        if os.environ.get("QMGR_REQUIRE_BROWSER"):
            pytest.fail("chromium and chromium-driver are required (QMGR_REQUIRE_BROWSER is set)")
        pytest.skip("chromium and chromium-driver are not installed")
    options = webdriver.ChromeOptions()
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--window-size=1280,860",
        "--disable-gpu",
    ):
        options.add_argument(argument)
    options.binary_location = found[0]
    driver = webdriver.Chrome(options=options, service=Service(found[1]))
    driver.set_page_load_timeout(30)
    # An element looked for on the page a click opens may take a moment to be there.
    driver.implicitly_wait(WITHIN)
    try:
        yield driver
    finally:
        driver.quit()


def _shots(tmp_path: Path) -> Path:
    where = Path(os.environ.get("QMGR_CONSOLE_SCREENSHOTS") or tmp_path)
    where.mkdir(parents=True, exist_ok=True)
    return where


def _log_in(browser: WebDriver, base: str, token: str) -> None:
    browser.get(base + "/console")
    assert browser.current_url.endswith("/console/login")  # no session: the form
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.ID, "log-in").click()


def _text(browser: WebDriver, element_id: str) -> str:
    """The text of an element. The live part of a page is replaced every 2 s, so an
    element found may be replaced before its text is read: it is found again then."""
    for _ in range(10):
        try:
            return str(browser.find_element(By.ID, element_id).text)
        except StaleElementReferenceException:
            continue
    msg = f"#{element_id} was replaced ten times in a row"
    raise AssertionError(msg)


def test_an_operator_s_session_in_a_browser(
    daemon_factory: Callable[..., DaemonProcess], browser: WebDriver, tmp_path: Path
) -> None:
    daemon = daemon_factory(name="qm-console", extra_args=auth_required(TOKENS, admins=["root"]))
    base = f"http://127.0.0.1:{daemon.http_port}"
    # The live part of a page is replaced every 2 s: an element a condition found
    # may be gone when it reads it, and the condition is tried again.
    wait = WebDriverWait(
        browser, WITHIN, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
    )
    with connect(daemon.address, token=TOKENS["root"]) as qm:
        qm.create_queue("orders", transactional=True)
        qm.grant("orders", "app", "receive")  # browse, but not purge

        # A token not accepted, then the operator's.
        _log_in(browser, base, "not-a-token")
        wait.until(lambda b: "not accepted" in b.page_source)
        browser.find_element(By.ID, "token").send_keys(TOKENS["root"])
        browser.find_element(By.ID, "log-in").click()
        wait.until(lambda b: b.current_url.endswith("/console"))
        assert "root" in browser.find_element(By.CLASS_NAME, "principal").text

        # The depth changes on the page, which is not reloaded.
        browser.get(base + "/console/queue?name=orders")
        assert _text(browser, "depth") == "0"
        browser.execute_script("window.notReloaded = true;")
        with qm.begin() as tx:
            tx.send("orders", b'{"order": 1, "items": ["<b>"]}', label="<b>first</b>")
            tx.send("orders", b"second", label="second")
            tx.send("orders", b"third", label="third")
        wait.until(lambda b: _text(b, "depth") == "3")
        assert browser.execute_script("return window.notReloaded === true;")
        browser.save_screenshot(str(_shots(tmp_path) / "console-queue.png"))

        # A message: its label as text, its JSON body pretty-printed.
        browser.find_element(By.LINK_TEXT, "1").click()
        wait.until(lambda b: "/console/message" in b.current_url)
        label = browser.find_element(By.CSS_SELECTOR, "dd.label")
        assert label.text == "<b>first</b>"
        assert label.get_attribute("innerHTML") == "&lt;b&gt;first&lt;/b&gt;"  # text, no element
        assert '"order": 1' in browser.find_element(By.CSS_SELECTOR, "pre.json").text

        # A dead letter (its time to be received ran out) moved back to its
        # queue, keeping its id; then a poisoned message from its subqueue.
        late = qm.send(
            "orders", b"late", label="late", time_to_be_received=1, journal=Journal.DEADLETTER
        )
        wait_until(lambda: [m.id for m in qm.peek_range(DEADXACT, max=10)] == [late], timeout=30)
        browser.get(base + "/console/dead-letters?" + urlencode({"queue": DEADXACT}))
        assert "late" in browser.find_element(By.CSS_SELECTOR, "table.messages").text
        browser.find_element(By.CLASS_NAME, "move-back").click()
        wait.until(lambda b: "back to their original queues" in b.page_source)
        assert [m.id for m in qm.peek_range("orders", max=10) if m.label == "late"] == [late]
        assert qm.peek_range(DEADXACT, max=10) == []
        second = next(m for m in qm.peek_range("orders", after=0, max=10) if m.label == "second")
        qm.move("orders", "orders;poison", second.lookup_id)
        browser.get(base + "/console/dead-letters?" + urlencode({"queue": "orders;poison"}))
        browser.find_element(By.CLASS_NAME, "move-back").click()
        wait.until(lambda b: "back to orders" in b.page_source)
        back = [m for m in qm.peek_range("orders", after=0, max=10) if m.label == "second"]
        assert [m.id for m in back] == [second.id]
        assert qm.peek_range("orders;poison", after=0, max=10) == []

        # The overview, with the rates chart.
        browser.get(base + "/console")
        wait.until(lambda b: _text(b, "messages-total") == "4")
        browser.save_screenshot(str(_shots(tmp_path) / "console-overview.png"))

        # Purge, after a confirmation that names the queue and the count.
        browser.get(base + "/console/queue?name=orders")
        browser.find_element(By.ID, "purge").click()
        question = browser.find_element(By.CLASS_NAME, "question").text
        assert "orders" in question
        assert "4 messages" in question
        browser.find_element(By.ID, "confirm").click()
        wait.until(lambda b: "Purged 4 messages from orders." in b.page_source)
        assert next(q.depth for q in qm.list_queues() if q.name == "orders") == 0

        # Log out: the session is gone; a principal without the right is refused.
        qm.send("orders", b"kept")
        browser.find_element(By.CSS_SELECTOR, ".who button").click()
        wait.until(lambda b: b.current_url.endswith("/console/login"))
        _log_in(browser, base, TOKENS["app"])
        wait.until(lambda b: b.current_url.endswith("/console"))
        browser.get(base + "/console/queue/purge?name=orders")
        browser.find_element(By.ID, "confirm").click()
        wait.until(lambda b: "access denied" in b.page_source)
        assert "app" in browser.find_element(By.CLASS_NAME, "error").text
        assert next(q.depth for q in qm.list_queues() if q.name == "orders") == 1

    # A queue manager that hangs (stopped, its connections open) is shown as
    # not answering, and the page comes back to life when it does.
    browser.get(base + "/console")
    stamp = browser.find_element(By.ID, "updated")
    wait.until(lambda b: stamp.text.startswith("updated"))
    assert daemon.process is not None
    os.kill(daemon.process.pid, signal.SIGSTOP)
    try:
        live = browser.find_element(By.ID, "live")
        wait.until(lambda b: "stale" in (live.get_attribute("class") or ""))
        assert "has not answered for 6 s" in stamp.text
    finally:
        os.kill(daemon.process.pid, signal.SIGCONT)
    wait.until(lambda b: "stale" not in (live.get_attribute("class") or ""))
    assert stamp.text.startswith("updated")
