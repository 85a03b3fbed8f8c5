"""What the HTTP listener checks of a request before any route runs, and what a browser says.

Each check reads only the request (its ASGI scope, or its headers) and says
what is wrong, or None; :class:`~qmgr.server.http.app.HttpApp` decides what to
answer (see its module docstring for why each check is made):

* the size of the request's head (:func:`head_size`, bounded by
  :data:`HEAD_LIMIT`: ``431`` past it);
* a credential named in the query string (:func:`credential_in_query`, by the
  names of :data:`CREDENTIAL_NAMES`: ``400``, :data:`TOKEN_IN_URL`);
* without TLS, a browser's ``Host`` that is not one this listener answers a
  browser at (:func:`host_refused`: ``421``, :func:`host_message`), against
  DNS rebinding;
* a request that may change something (not one of :data:`SAFE_METHODS`) that
  a browser says a page on another site made (:func:`cross_site`: ``403``),
  checked by the API's routes and the console's forms.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

from starlette.requests import Request
from starlette.types import Scope

__all__ = [
    "CREDENTIAL_NAMES",
    "HEAD_LIMIT",
    "SAFE_METHODS",
    "TOKEN_IN_URL",
    "credential_in_query",
    "cross_site",
    "head_size",
    "host_message",
    "host_refused",
]

#: Bytes of a request's line and headers (``431`` past it; see the module docstring).
HEAD_LIMIT: Final = 16 * 1024

#: Query parameters that carry a credential: a request that has one is refused
#: (compared without case, ``-`` read as ``_``).
CREDENTIAL_NAMES: Final = frozenset(
    {
        "access_token",
        "auth_token",
        "token",
        "bearer",
        "auth",
        "authorization",
        "api_key",
        "apikey",
        "password",
    }
)
#: Methods that change nothing: a page on another site may make them (its
#: browser keeps the answer from it).
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
#: Why a request with a credential in its query is refused.
TOKEN_IN_URL: Final = (
    "a token is taken only from the Authorization header (Bearer TOKEN), "
    "never from the URL: remove it from the URL, and replace the token, "
    "which may have been logged"
)


def head_size(scope: Scope) -> int:
    """The bytes of the head of the request of ``scope`` as parsed: its line
    (method, target, ``HTTP/`` and version) and each header (``name: value``,
    the value without the white space around it), each ended by CRLF, and the
    blank line (a head written with extra white space or bare LFs is a few
    bytes longer or shorter on the wire)."""
    target = len(scope.get("raw_path") or str(scope.get("path", "")).encode())
    query = scope.get("query_string") or b""
    if query:
        target += 1 + len(query)
    method = str(scope.get("method", ""))
    version = str(scope.get("http_version", "1.1"))
    line = len(method) + 1 + target + 1 + len("HTTP/") + len(version) + 2
    return line + sum(len(name) + 2 + len(value) + 2 for name, value in scope["headers"]) + 2


def credential_in_query(query: Any) -> str | None:
    """The name of the first query parameter that carries a credential, or None."""
    if not query:
        return None
    text = bytes(query).decode("latin-1")
    for name, _ in parse_qsl(text, keep_blank_values=True):
        if name.strip().lower().replace("-", "_") in CREDENTIAL_NAMES:
            return name
    return None


def cross_site(request: Request) -> str | None:
    """Why a browser says ``request`` comes from a page on another site, or None.

    ``Sec-Fetch-Site`` when the browser sends it (``same-origin``, or ``none``
    for what the user typed, is this site); else ``Origin``, which must name
    the ``Host`` the request was sent to (``null``, from a sandboxed frame or a
    redirect, is another site). A request with neither is not from a browser's
    page, or from one too old to say: it is not refused here.
    """
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        if fetch_site.strip().lower() in ("same-origin", "none"):
            return None
        return f"Sec-Fetch-Site: {fetch_site[:40]}"
    origin = request.headers.get("origin")
    if origin is None:
        return None
    host = request.headers.get("host", "").lower()
    if origin == "null" or urlsplit(origin).netloc.lower() != host:
        return f"Origin: {origin[:200]}"
    return None


def host_refused(scope: Scope, names: frozenset[str]) -> str | None:
    """The ``Host`` a browser's request names, if it is not one this listener
    answers a browser at without TLS (see the module docstring), else None.

    A browser says it is one with ``Sec-Fetch-Site`` or ``Origin``; its
    ``Host`` must then be an IP address, ``localhost`` (or a name under it),
    or one of ``names``. A page whose own name the attacker made resolve to
    this listener (DNS rebinding) names its own host, and is refused.
    """
    host = ""
    browser = False
    for name, value in scope["headers"]:
        if name == b"host":
            host = value.decode("latin-1").strip().lower()
        elif name in (b"sec-fetch-site", b"origin"):
            browser = True
    if not browser or not host:
        return None
    if host.startswith("["):
        name = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        name = host.partition(":")[0]
    else:
        name = host  # without a port, or a bare IPv6 address
    name = name.rstrip(".")
    try:
        ipaddress.ip_address(name)
    except ValueError:
        pass
    else:
        return None
    if name == "localhost" or name.endswith(".localhost") or name in names:
        return None
    return host


def host_message(host: str) -> str:
    """Why a browser's request at ``host`` (refused by :func:`host_refused`) is refused."""
    return (
        f"this queue manager does not answer browsers at {host!r} without TLS: "
        "use its IP address, localhost or a name of http.allowed_hosts (or TLS, tls.http)"
    )
