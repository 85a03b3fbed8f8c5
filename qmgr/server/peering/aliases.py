"""How other queue managers reach this one: ``server.aliases`` checked at start-up,
and the name this queue manager's reply queues carry.

Theory of operation
-------------------
An alias makes a send to it local, so an alias that is really another queue
manager's address would deliver here what was meant for it. At start-up the
daemon opens a session to each alias that has an address it can try (the
peer port when the alias names none), as it would to any next hop, and
reads who answers:

* this queue manager (its own certificate under mutual TLS, or its own
  GUID): ``alias_confirmed``;
* another queue manager: ``alias_names_another_queue_manager``, an error
  with its GUID: fix ``server.aliases``;
* nobody (refused, timed out: a NAT that does not hairpin cannot be reached
  from inside it): ``alias_not_checked``, at info level, with the reason.

The check sends no message and changes nothing; it runs once, in the
background, and never holds up the start.

A message's admin and response queues here travel as direct names the
destination can reach back (:func:`reached_back`): the address this queue
manager listens on, or, when it listens on every address, its first alias,
else ``server.name``. A queue manager behind a port map or a NAT lists its
public name first in ``server.aliases`` so that acknowledgments and
responses find their way back.
"""

from __future__ import annotations

import ipaddress
from typing import Final

import trio

from qmgr.config import Config
from qmgr.core.routes import endpoint_text
from qmgr.protocol import Role

from ..tls import TlsFailed
from .connection import ConnectionContext, PeerConnection
from .dial import CannotConnect, open_hop, secure, shows_own_certificate

__all__ = ["check_aliases", "reached_back"]

#: Listen addresses meaning "every address".
_WILDCARDS: Final = frozenset({"", "0.0.0.0", "::", "*"})


async def check_aliases(context: ConnectionContext) -> None:
    """Check every alias of ``server.aliases`` in turn (see the module docstring)."""
    config = context.parts.config
    for host, port in config.aliases:
        await _check(context, (host, config.listen.port if port is None else port))


async def _check(context: ConnectionContext, alias: tuple[str, int]) -> None:
    parts = context.parts
    config = parts.config
    name = endpoint_text(*alias)
    log = parts.log.bind(alias=name)
    try:
        stream = await open_hop(*alias, within=config.peer_connect_timeout)
    except CannotConnect as exc:
        log.info("alias_not_checked", reason=f"cannot connect: {exc}")
        return
    try:
        session_stream, identity = await secure(stream, context, server_side=False)
    except TlsFailed as exc:
        with trio.CancelScope(shield=True):
            await stream.aclose()
        log.info("alias_not_checked", reason=str(exc))
        return
    if isinstance(session_stream, trio.SSLStream):
        # Under mutual TLS the certificate says who it is: no session needed.
        itself = shows_own_certificate(session_stream, context)
        with trio.CancelScope(shield=True):
            await session_stream.aclose()
        if itself:
            log.info("alias_confirmed", how="it shows this queue manager's certificate")
        else:
            log.error(
                "alias_names_another_queue_manager",
                identity=identity,
                advice="a send to it is delivered here: remove it from server.aliases",
            )
        return
    connection = PeerConnection(context, session_stream, role=Role.INITIATOR, peer=name)
    async with trio.open_nursery() as nursery:

        async def close_once_open() -> None:
            await connection.opened.wait()
            connection.close_soon("server.aliases checked")

        nursery.start_soon(close_once_open)
        with trio.move_on_after(config.peer_init_timeout):
            await connection.run()
        nursery.cancel_scope.cancel()
    if connection.reached_itself:
        log.info("alias_confirmed", how="it announces this queue manager's GUID")
    elif connection.remote_qm is not None:
        log.error(
            "alias_names_another_queue_manager",
            remote_qm=str(connection.remote_qm),
            advice="a send to it is delivered here: remove it from server.aliases",
        )
    else:
        log.info("alias_not_checked", reason=connection.close_reason or "no session")


def reached_back(config: Config) -> str:
    """How a destination reaches this queue manager back, as a direct name's
    protocol and host (``TCP:10.0.0.1:28001``, ``OS:qm1.example.net``): by the
    address it listens on (``DIRECT=TCP:`` takes addresses only), the host name
    it listens on, or, listening on every address (or a link-local one, whose
    scope means nothing on the peer's side), the first of ``server.aliases``
    that another host can reach (the names other queue managers reach it by:
    a port map, a NAT; not ``localhost``, a loopback or a link-local
    address), else ``server.name``. The port follows unless it is 1801."""
    host, port = config.listen.host, config.listen.port
    if host in _WILDCARDS or _only_here(host, loopback=False):
        reachable = [alias for alias in config.aliases if not _only_here(alias[0])]
        if reachable:
            alias, alias_port = reachable[0]
            host, port = alias, port if alias_port is None else alias_port
        else:
            host = config.name
    suffix = "" if port == 1801 else f":{port}"
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return f"OS:{host}{suffix}"
    written = f"[{address}]" if address.version == 6 else str(address)
    return f"TCP:{written}{suffix}"


def _only_here(host: str, *, loopback: bool = True) -> bool:
    """Whether ``host`` names this host only as seen from its own link (a
    link-local address) or, with ``loopback``, from itself (``localhost``, a
    loopback address: a listener's, which peers on this host do reach, is kept)."""
    if loopback and host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]").partition("%")[0])
    except ValueError:
        return False
    return address.is_link_local or (loopback and address.is_loopback)
