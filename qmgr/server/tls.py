"""TLS on the client and peer ports and the HTTP listener; which listeners need it.

Theory of operation
-------------------
TLS is the standard library's ``ssl`` through ``trio.SSLStream``. The
contexts are built once, at start-up, from ``[tls]`` (:func:`load_contexts`):

* **clients**: the client port's server side. A client certificate is asked
  for and checked against ``tls.ca``; it is required when ``auth.required``
  is true (a certificate is then how a client authenticates), optional
  otherwise. Its common name is the connection's *principal*.
* **peer_server** and **peer_client**: mutual TLS between queue managers.
  Both sides present this queue manager's certificate and require the
  other's, signed by ``tls.ca``. The peer's *identity* is the common name of
  its certificate. Host names are not checked: a destination is often named
  by address, and what a peer may do is decided by its identity, which
  ``peering.identity`` ties to the queue manager GUID it speaks for.

Every handshake has a deadline (:func:`handshake`): a client that connects
and says nothing, or speaks plain text to a TLS port, costs one connection
slot for at most that long, and the failure is one line in the log with the
reason ``ssl`` gives.

Which certificates each port takes is said by their extended key usages
(what ``qmgr certs issue`` writes: serverAuth and clientAuth for a queue
manager, clientAuth alone for a client):

* **peer port**: both sides serve and connect, so both usages are required,
  of the other side's certificate (:func:`peer_handshake`, once the
  handshake is done) and of this queue manager's own (at start-up). A
  certificate without the extension is refused there. ``ssl`` checks only
  the usage of the role a certificate plays in one handshake, so without
  this check a client's certificate would pass as an initiator and speak
  for a queue manager.
* **client port**: this queue manager's certificate needs serverAuth, or no
  extended key usage at all (X.509 reads that as any usage, and so do
  clients' ``ssl``). Clients' certificates are ``ssl``'s to check.

At start-up :func:`load_contexts` also refuses a certificate that has
expired or is not yet valid, naming ``tls.certificate`` and its file, rather
than let every client's and peer's handshake fail later. One that expires
while the queue manager runs is refused by the other ends' handshakes.
Those checks read certificates with ``cryptography``, in
``qmgr.server.certificates``, imported only when TLS is on.

A fourth context, **http**, serves the HTTP listener (``tls.http``): HTTP/1.1
only (ALPN), a client certificate asked for and checked against ``tls.ca``
but never required (a bearer token is the other way to authenticate there).

:func:`check_exposure` is the start-up rule: a listener on an address other
hosts can reach must be protected (the peer port by mutual TLS, the client
port and the HTTP listener by TLS and ``auth.required``) unless
``server.insecure`` says to run it anyway.
"""

from __future__ import annotations

import ipaddress
import ssl
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import trio

from qmgr.config import Address, Config

__all__ = [
    "ShowsCertificate",
    "StartsTls",
    "TlsContexts",
    "TlsFailed",
    "check_exposure",
    "common_name",
    "exposure",
    "handshake",
    "is_loopback",
    "load_contexts",
    "peer_handshake",
    "start_tls",
]

_VERSIONS: Final = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


class TlsFailed(Exception):
    """A TLS handshake failed; the message says why (for the log)."""

    def __init__(self, message: str, *, closed: bool = False) -> None:
        super().__init__(message)
        #: The other side closed the connection without a word of TLS (a port
        #: probe, a health check that only connects): not worth a warning.
        self.closed = closed


@dataclass(frozen=True, slots=True)
class TlsContexts:
    """The contexts of one queue manager (None: that side does not use TLS)."""

    clients: ssl.SSLContext | None
    peer_server: ssl.SSLContext | None
    peer_client: ssl.SSLContext | None
    #: This queue manager's own certificate (DER) when the peer port uses TLS: a
    #: peer that shows it is this queue manager (only it holds the key).
    own_certificate: bytes | None = None
    #: That certificate's common name: this queue manager's identity as a peer.
    own_identity: str | None = None
    #: The HTTP listener's server side (HTTPS), None: plain HTTP.
    http: ssl.SSLContext | None = None


def load_contexts(config: Config) -> TlsContexts:
    """Build the TLS contexts ``config`` asks for.

    Raises:
        ValueError: a file cannot be read, is not PEM, or the key does not
            match the certificate; or the certificate has expired, is not yet
            valid, or lacks the extended key usages of the ports it is for
            (the message names the key and the file).
    """
    if config.tls_certificate is None:
        return TlsContexts(None, None, None)
    if config.tls_clients or config.tls_peers or config.tls_http:
        _check_certificate(config, config.tls_certificate)
    clients = None
    if config.tls_clients:
        clients = _context(config, ssl.Purpose.CLIENT_AUTH)
        # A certificate is how a client authenticates, unless tokens may be used instead.
        tokens = bool(config.auth_tokens) or config.auth_tokens_file is not None
        required = config.auth_required and not tokens
        clients.verify_mode = ssl.CERT_REQUIRED if required else ssl.CERT_OPTIONAL
    peer_server = peer_client = None
    own = own_identity = None
    if config.tls_peers:
        from .certificates import own_certificate

        own, own_identity = own_certificate(config.tls_certificate)
        peer_server = _context(config, ssl.Purpose.CLIENT_AUTH)
        peer_server.verify_mode = ssl.CERT_REQUIRED
        peer_client = _context(config, ssl.Purpose.SERVER_AUTH)
        peer_client.check_hostname = False
        peer_client.verify_mode = ssl.CERT_REQUIRED
    http = None
    if config.tls_http and config.http_listen is not None:
        http = _context(config, ssl.Purpose.CLIENT_AUTH)
        # A client certificate is one way to authenticate, a token the other.
        http.verify_mode = ssl.CERT_OPTIONAL
        http.set_alpn_protocols(["http/1.1"])
    return TlsContexts(clients, peer_server, peer_client, own, own_identity, http)


def key_file_warnings(config: Config) -> list[str]:
    """Warnings about ``tls.key`` when TLS is on: a key every user may read
    (group access is left alone: a key shared with a group, as Debian's
    ``ssl-cert``, is a common set-up). A key that cannot be read at all is
    :func:`load_contexts`' error, not a warning."""
    path = config.tls_key
    if path is None or not (config.tls_clients or config.tls_peers or config.tls_http):
        return []
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return []
    if not mode & 0o004:
        return []
    return [
        f"tls.key {path} can be read by every user (mode {mode:04o}), who could then "
        f"pose as this queue manager: chmod 600 {path}"
    ]


def _check_certificate(config: Config, path: Path) -> None:
    """Refuse this queue manager's certificate if it cannot be used now on its ports
    (:func:`.certificates.check_own`; cryptography is imported only when TLS is on)."""
    from .certificates import check_own

    check_own(config, path)


def _check_queue_manager(stream: trio.SSLStream[trio.abc.Stream], identity: str) -> None:
    """Refuse a peer whose certificate is not a queue manager's (a client's, say)."""
    from .certificates import queue_manager_refusal

    refusal = queue_manager_refusal(stream.getpeercert(binary_form=True), identity)
    if refusal is not None:
        raise TlsFailed(refusal)


def _context(config: Config, purpose: ssl.Purpose) -> ssl.SSLContext:
    assert config.tls_certificate is not None
    assert config.tls_key is not None
    assert config.tls_ca is not None
    context = ssl.create_default_context(purpose)
    context.minimum_version = _VERSIONS[config.tls_min_version]
    # No renegotiation under TLS 1.2: a connection's reads and writes are then
    # never needed by each other (``qmgr.socket_stream``).
    context.options |= ssl.OP_NO_RENEGOTIATION
    try:
        context.load_cert_chain(config.tls_certificate, config.tls_key)
    except (OSError, ssl.SSLError) as exc:
        msg = (
            f"cannot load tls.certificate {config.tls_certificate} with tls.key "
            f"{config.tls_key}: {_reason(exc)}"
        )
        raise ValueError(msg) from exc
    try:
        context.load_verify_locations(cafile=config.tls_ca)
    except (OSError, ssl.SSLError) as exc:
        msg = f"cannot load tls.ca {config.tls_ca}: {_reason(exc)}"
        raise ValueError(msg) from exc
    return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return f"certificate not trusted ({exc.verify_message})"
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


async def handshake(
    stream: trio.abc.Stream,
    context: ssl.SSLContext,
    *,
    server_side: bool,
    within: float,
    server_hostname: str | None = None,
    https_compatible: bool = False,
) -> trio.SSLStream[trio.abc.Stream]:
    """Wrap ``stream`` in TLS and finish the handshake ``within`` seconds
    (``https_compatible``: as HTTPS clients expect, see ``trio.SSLStream``).

    Raises:
        TlsFailed: the handshake failed or took too long (``stream`` is not
            closed: the caller owns it).
    """
    secure = trio.SSLStream(
        stream,
        context,
        server_side=server_side,
        server_hostname=server_hostname,
        https_compatible=https_compatible,
    )
    await _shake_hands(secure.do_handshake, within)
    return secure


async def _shake_hands(handshake: Callable[[], Awaitable[None]], within: float) -> None:
    """Run ``handshake`` under a deadline of ``within`` seconds; its failures as
    ``TlsFailed``, ``closed`` when the other side went away without a word of TLS."""
    try:
        with trio.fail_after(within):
            await handshake()
    except trio.TooSlowError:
        msg = f"no TLS handshake within {within:g} s"
        raise TlsFailed(msg) from None
    except trio.BrokenResourceError as exc:
        cause = exc.__cause__
        closed = cause is None or isinstance(cause, ssl.SSLEOFError | ConnectionError)
        reason = "the connection was closed" if cause is None or closed else _reason(cause)
        msg = f"TLS handshake failed: {reason}"
        raise TlsFailed(msg, closed=closed) from None
    except OSError as exc:  # ssl.SSLError included
        msg = f"TLS handshake failed: {_reason(exc)}"
        raise TlsFailed(msg) from None


class StartsTls(Protocol):
    """A connection that can turn itself into TLS (``qmgr.socket_stream.RawConnection``)."""

    async def start_tls(self, context: ssl.SSLContext) -> None:
        """Shake hands as the TLS server."""
        ...


async def start_tls(connection: StartsTls, context: ssl.SSLContext, *, within: float) -> None:
    """Shake hands as the TLS server on ``connection`` within ``within`` seconds.

    Raises:
        TlsFailed: the handshake failed or took too long (``connection`` is
            not closed: the caller owns it).
    """
    await _shake_hands(lambda: connection.start_tls(context), within)


async def peer_handshake(
    stream: trio.abc.Stream, context: ssl.SSLContext, *, server_side: bool, config: Config
) -> tuple[trio.SSLStream[trio.abc.Stream], str]:
    """Mutual TLS with another queue manager (within ``peers.connect_timeout``):
    the secure stream and the peer's identity, its certificate's common name.

    Either side (``server_side`` or not) takes only a queue manager's
    certificate, one whose extended key usages include serverAuth and
    clientAuth.

    Raises:
        TlsFailed: the handshake failed, or the certificate has no common
            name or is not a queue manager's (``stream`` is not closed).
    """
    secure = await handshake(
        stream, context, server_side=server_side, within=config.peer_connect_timeout
    )
    identity = common_name(secure)
    if identity is None:
        msg = "the peer's certificate has no common name to identify it"
        raise TlsFailed(msg)
    _check_queue_manager(secure, identity)
    return secure, identity


class ShowsCertificate(Protocol):
    """A TLS connection: ``trio.SSLStream``, or a ``RawConnection`` under TLS."""

    def getpeercert(self) -> Any:
        """The other side's certificate, decoded (empty or None: none)."""
        ...


def common_name(stream: ShowsCertificate) -> str | None:
    """The common name of the other side's certificate (None: it showed none)."""
    certificate = stream.getpeercert()
    if not certificate:
        return None
    for attributes in certificate.get("subject", ()):
        for key, value in attributes:
            if key == "commonName":
                return str(value)
    return None


def is_loopback(host: str) -> bool:
    """True if ``host`` (a listen address) can be reached only from this host."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a wildcard ("") or a host name: assume it is reachable


def exposure(config: Config) -> list[str]:
    """The listeners that other hosts can reach without the protection they need,
    each as a sentence saying what to configure (empty: none)."""
    problems = []
    if not is_loopback(config.listen.host) and not config.tls_on_peers:
        problems.append(_exposed("peer", config.listen, "mutual TLS ([tls] certificate, key, ca)"))
    if not is_loopback(config.client_listen.host) and not (
        config.tls_on_clients and config.auth_required
    ):
        problems.append(
            _exposed("client", config.client_listen, "TLS ([tls]) and [auth] required = true")
        )
    http = config.http_listen
    if (
        http is not None
        and not is_loopback(http.host)
        and not (config.tls_on_http and config.auth_required)
    ):
        problems.append(
            _exposed("HTTP", http, "TLS ([tls], tls.http = true) and [auth] required = true")
        )
    return problems


def check_exposure(config: Config) -> list[str]:
    """Refuse listeners that other hosts can reach without protection, unless
    ``server.insecure`` allows them; returns those it allowed.

    Raises:
        ValueError: such a listener, and ``server.insecure`` is not set (the
            message says what to configure).
    """
    problems = exposure(config)
    if problems and not config.insecure:
        msg = (
            "; ".join(problems)
            + ". Set server.insecure = true only to run it anyway on a network you trust."
        )
        raise ValueError(msg)
    return problems


def _exposed(what: str, address: Address, needs: str) -> str:
    return f"the {what} listener {address} can be reached from other hosts and needs {needs}"
