"""TLS for the SDK: the context a client uses, and the blocking client's TLS socket I/O.

A client connects over TLS when it is given an ``ssl.SSLContext``
(:func:`tls_context` makes the usual one: trust the deployment's CA, check
the queue manager's host name, and present a client certificate when one is
given, which is how the client authenticates).

The blocking :class:`~qmgr.client.QueueManager` reads and writes a plain
socket with non-blocking flags on a blocking socket. An ``ssl.SSLSocket``
takes no flags, so over TLS the socket is non-blocking and
:class:`TlsQueueManager` waits with ``poll``: a read first takes what the
TLS layer already holds (data can be decrypted and waiting while the kernel
has nothing), and waits only when TLS asks for more bytes, or for room to
write (a renegotiation or a key update can need either).
"""

from __future__ import annotations

import select
import socket
import ssl
from os import PathLike
from typing import Final

from ._blocking import QueueManager
from ._errors import ConnectionLost

__all__ = ["TlsQueueManager", "connect_tls", "tls_context"]

_VERSIONS: Final = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
_CONN_ERRORS = (OSError, EOFError)


def tls_context(
    ca: str | PathLike[str] | None = None,
    *,
    certificate: str | PathLike[str] | None = None,
    key: str | PathLike[str] | None = None,
    min_version: str = "1.2",
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """The TLS context of a client of a queue manager.

    Args:
        ca: the CA bundle (PEM) that signed the queue manager's certificate;
            None trusts the system's CAs.
        certificate: this client's certificate (PEM), to authenticate with;
            its common name is the principal the queue manager knows it as.
        key: the certificate's private key (PEM; default: in ``certificate``).
        min_version: the oldest TLS version accepted, ``"1.2"`` or ``"1.3"``.
        check_hostname: check that the queue manager's certificate names the
            host connected to (keep it on; off only for an address that the
            certificate does not list, on a network you trust).

    Raises:
        ValueError: ``min_version`` is neither; a file cannot be loaded.
    """
    if min_version not in _VERSIONS:
        msg = f"min_version must be '1.2' or '1.3', not {min_version!r}"
        raise ValueError(msg)
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        msg = f"cannot load the CA bundle {ca}: {exc}"
        raise ValueError(msg) from exc
    context.minimum_version = _VERSIONS[min_version]
    context.check_hostname = check_hostname
    if certificate is not None:
        try:
            context.load_cert_chain(certificate, key)
        except (OSError, ssl.SSLError) as exc:
            msg = f"cannot load the client certificate {certificate}: {exc}"
            raise ValueError(msg) from exc
    return context


class TlsQueueManager(QueueManager):
    """A :class:`~qmgr.client.QueueManager` over TLS (see the module docstring)."""

    #: Milliseconds a wait may last (None: no limit; set while connecting).
    poll_timeout_ms: int | None = None

    def _wait(self, events: int) -> None:
        poller = select.poll()
        poller.register(self._sock, events)
        if not poller.poll(self.poll_timeout_ms):
            msg = f"the queue manager at {self.address} did not answer in time"
            raise self._lost(TimeoutError(msg))

    def _flush(self) -> None:
        out = self._proto.out
        if not out:
            return
        sock = self._sock
        with memoryview(out) as view:
            sent = 0
            while sent < len(view):
                try:
                    sent += sock.send(view[sent:])
                except ssl.SSLWantWriteError:
                    self._wait_to_write()
                except ssl.SSLWantReadError:
                    self._wait(select.POLLIN)
                except _CONN_ERRORS as exc:
                    raise self._lost(exc) from None
        out.clear()

    def _wait_to_write(self) -> None:
        """Wait for room to write, reading the replies that arrive meanwhile (the
        daemon may be blocked writing them to us)."""
        poller = select.poll()
        poller.register(self._sock, select.POLLIN | select.POLLOUT)
        events = poller.poll(self.poll_timeout_ms)
        if not events:
            msg = f"the queue manager at {self.address} did not read in time"
            raise self._lost(TimeoutError(msg))
        if any(event & select.POLLIN for _, event in events):
            self._read(block=False)

    def _read(self, *, block: bool) -> None:
        sock = self._sock
        while True:
            try:
                count = sock.recv_into(self._recv_buffer)
                break
            except ssl.SSLWantReadError:
                if not block:
                    return
                self._wait(select.POLLIN)
            except ssl.SSLWantWriteError:
                self._wait(select.POLLOUT)
            except _CONN_ERRORS as exc:
                raise self._lost(exc) from None
        self._dispatch(count)


def connect_tls(
    sock: socket.socket,
    context: ssl.SSLContext,
    host: str,
    where: str,
    timeout: float | None,
    client_name: str,
    token: str | None = None,
) -> QueueManager:
    """Finish :func:`~qmgr.client.connect` over TLS: the handshake on ``sock`` (under
    its timeout), then the Hello with every wait bounded by ``timeout``."""
    try:
        secure = context.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as exc:
        msg = (
            f"cannot connect to the queue manager at {where}: its certificate is not "
            f"trusted ({exc.verify_message})"
        )
        raise ConnectionLost(msg) from None
    except (OSError, ssl.SSLError) as exc:
        reason = exc.reason if isinstance(exc, ssl.SSLError) and exc.reason else str(exc)
        msg = f"cannot connect to the queue manager at {where}: TLS handshake failed: {reason}"
        raise ConnectionLost(msg) from None
    secure.setblocking(False)
    qm = TlsQueueManager(secure, where)
    qm.poll_timeout_ms = None if timeout is None else max(1, int(timeout * 1000))
    try:
        qm._handshake(client_name, token)
    except BaseException:
        secure.close()
        raise
    qm.poll_timeout_ms = None
    return qm
