"""What is checked of a request before any route (``request_checks``), each check
on its own: the size of a request's head as its bytes, a credential named in the
query, a page on another site by ``Sec-Fetch-Site`` or ``Origin``, and the
``Host`` a browser may use without TLS."""

from __future__ import annotations

import pytest
from http_kit import asgi_scope
from starlette.requests import Request

from qmgr.server.http.request_checks import (
    credential_in_query,
    cross_site,
    head_size,
    host_message,
    host_refused,
)


@pytest.mark.parametrize(
    ("method", "path", "query", "headers", "http_version"),
    [
        ("GET", "/healthz", "", [], "1.1"),
        ("POST", "/api/v1/queues/q/purge", "a=1&b=2", [("host", "qmgr:1803")], "1.1"),
        ("GET", "/metrics", "", [("accept", "  text/plain  "), ("x-y", "")], "1.0"),
    ],
)
def test_a_head_s_size_is_the_bytes_of_its_line_and_headers(
    method: str, path: str, query: str, headers: list[tuple[str, str]], http_version: str
) -> None:
    scope = asgi_scope(method, path, query=query, headers=headers, http_version=http_version)
    target = path + (f"?{query}" if query else "")
    written = f"{method} {target} HTTP/{http_version}\r\n".encode()
    for name, value in scope["headers"]:
        written += name + b": " + value + b"\r\n"
    written += b"\r\n"
    assert head_size(scope) == len(written)


def test_a_head_s_size_counts_the_raw_path_as_sent() -> None:
    scope = asgi_scope("GET", "/queues/a b")
    scope["raw_path"] = b"/queues/a%20b"
    assert head_size(scope) - head_size(asgi_scope("GET", "/queues/a b")) == 2


@pytest.mark.parametrize(
    ("query", "named"),
    [
        (b"", None),
        (b"name=orders&after=5", None),
        (b"access_token=x", "access_token"),
        (b"a=1&Access-Token=x", "Access-Token"),
        (b"TOKEN", "TOKEN"),  # without a value
        (b"api%5Fkey=x", "api_key"),  # as the query decodes
        (b"+password+=x", " password "),
        (b"tokens=x&tokenize=y", None),  # only the names themselves
        (b"x=access_token", None),  # a value is not a name
    ],
)
def test_a_credential_in_the_query_is_found_by_its_name(query: bytes, named: str | None) -> None:
    assert credential_in_query(query) == named


def request(*headers: tuple[str, str], method: str = "POST") -> Request:
    return Request(asgi_scope(method, "/api/v1/queues/q/purge", headers=headers))


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ((), None),  # not a browser's page
        ((("sec-fetch-site", "same-origin"),), None),
        ((("sec-fetch-site", " None "),), None),  # typed by the user
        ((("sec-fetch-site", "same-site"),), "Sec-Fetch-Site: same-site"),
        (
            (("sec-fetch-site", "cross-site"), ("origin", "http://qmgr")),
            "Sec-Fetch-Site: cross-site",
        ),
        ((("sec-fetch-site", "x" * 100),), "Sec-Fetch-Site: " + "x" * 40),
        ((("origin", "http://QMGR:1803"), ("host", "qmgr:1803")), None),
        ((("origin", "http://qmgr:1803"), ("host", "qmgr:1804")), "Origin: http://qmgr:1803"),
        ((("origin", "null"), ("host", "null")), "Origin: null"),
        ((("origin", "http://qmgr"),), "Origin: http://qmgr"),  # no Host to match
        ((("origin", "http://" + "e" * 300), ("host", "x")), "Origin: http://" + "e" * 193),
    ],
)
def test_a_page_on_another_site_is_told_by_sec_fetch_site_else_origin(
    headers: tuple[tuple[str, str], ...], why: str | None
) -> None:
    assert cross_site(request(*headers)) == why


def browser_at(host: str, *, browser: str = "origin") -> dict[str, object]:
    return asgi_scope("GET", "/console", headers=[("host", host), (browser, "x")])


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:1803",
        "127.0.0.1",
        "[::1]:1803",
        "::1",
        "[fe80::1]",
        "localhost",
        "LOCALHOST:1803",
        "localhost.:1803",
        "console.localhost:1803",
        "qmgr",
        "Qmgr.:1803",
        "console.example.net:443",
    ],
)
def test_a_browser_may_use_an_address_localhost_or_a_name_of_the_listener(host: str) -> None:
    names = frozenset({"qmgr", "console.example.net"})
    assert host_refused(browser_at(host), names) is None
    assert host_refused(browser_at(host, browser="sec-fetch-site"), names) is None


@pytest.mark.parametrize(
    ("host", "refused"),
    [
        ("rebound.example:1803", "rebound.example:1803"),
        ("QMGR.evil.example", "qmgr.evil.example"),
        ("localhost.evil.example", "localhost.evil.example"),
        ("127.0.0.1.evil.example:80", "127.0.0.1.evil.example:80"),
    ],
)
def test_a_browser_at_any_other_host_is_refused_naming_it(host: str, refused: str) -> None:
    names = frozenset({"qmgr"})
    assert host_refused(browser_at(host), names) == refused
    assert host_refused(browser_at(host, browser="sec-fetch-site"), names) == refused


def test_only_a_browser_with_a_host_is_checked() -> None:
    program = asgi_scope("GET", "/metrics", headers=[("host", "rebound.example")])
    assert host_refused(program, frozenset()) is None  # curl, Prometheus, a script
    no_host = asgi_scope("GET", "/metrics", headers=[("origin", "http://rebound.example")])
    assert host_refused(no_host, frozenset()) is None


def test_the_refusal_names_the_host_and_what_to_use_instead() -> None:
    assert host_message("rebound.example:1803") == (
        "this queue manager does not answer browsers at 'rebound.example:1803' without TLS: "
        "use its IP address, localhost or a name of http.allowed_hosts (or TLS, tls.http)"
    )
