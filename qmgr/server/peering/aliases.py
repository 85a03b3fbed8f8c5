"""The check of ``server.aliases`` at start-up: does each alias reach this queue manager?

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
"""

from __future__ import annotations

import trio

from qmgr.core.routes import endpoint_text
from qmgr.protocol import Role

from ..tls import TlsFailed
from .connection import ConnectionContext, PeerConnection
from .dial import CannotConnect, open_hop, secure, shows_own_certificate

__all__ = ["check_aliases"]


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
