"""The table of client requests: each request's handler, and the need that authorizes it.

Theory of operation
-------------------
A request handler is a plain function ``handler(ctx, request_id, request)``
(``ctx``: the connection's :class:`~.request_context.RequestContext`). One that
completes without waiting puts its reply in the outbox and returns None; one
that must wait (for a write, mostly) returns the awaitable the session
awaits before it reads on. Handlers raise the core's errors; the session
answers them.

Each handler module has a :class:`Registry` and declares its handlers on it,
each with the request class it serves and the need (``needs``) that
authorizes it, next to the function::

    HANDLERS = Registry()

    @HANDLERS.handles(cf.PurgeQueue, need=QueueRight("name", Right.PURGE))
    async def purge_queue(ctx, request_id, request): ...

``qmgr.server.client.handlers`` merges them into one table, ``REQUESTS``,
which the session dispatches from and whose needs ``Authorization.denial``
checks before any handler runs. A registry refuses a handler without a need
(there is no default: a new request is closed to everyone until its author
says who may make it), a class that is not a request a server runs, and a
class registered twice.
"""

from __future__ import annotations

import typing
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, TypeVar

from wire import client as cf

from .needs import NEEDS, Need
from .request_context import RequestContext

__all__ = ["Entry", "Handler", "Registry"]

#: ``handler(ctx, request_id, request)``: None when answered, else the awaitable to await.
Handler: TypeAlias = Callable[[RequestContext, int, Any], Awaitable[None] | None]
H = TypeVar("H", bound=Callable[..., Any])

#: The requests a server may run (Hello and Authenticate are the connection's own).
_REQUEST_CLASSES: Final = frozenset(typing.get_args(cf.ClientRequest)) - {
    cf.Hello,
    cf.Authenticate,
}


@dataclass(frozen=True, slots=True)
class Entry:
    """A request's handler and what authorizes it."""

    handler: Handler
    need: Need


class Registry(Mapping[type[Any], Entry]):
    """Request classes -> :class:`Entry`; see the module docstring."""

    def __init__(self) -> None:
        self._entries: dict[type[Any], Entry] = {}

    def handles(self, request: type[Any], *, need: Need) -> Callable[[H], H]:
        """Register the decorated function as the handler of ``request``, which
        ``need`` authorizes.

        Raises:
            TypeError: ``need`` is not a need, or ``request`` not a request a server runs.
            ValueError: ``request`` already has a handler here.
        """
        name = getattr(request, "__name__", repr(request))
        declared: object = need  # a caller without types may pass anything
        if not isinstance(declared, NEEDS):
            msg = f"{name} declares no need (got {need!r})"
            raise TypeError(msg)
        if request not in _REQUEST_CLASSES:
            msg = f"{name} is not a request a server runs"
            raise TypeError(msg)
        if request in self._entries:
            msg = f"{name} already has a handler"
            raise ValueError(msg)

        def register(handler: H) -> H:
            self._entries[request] = Entry(handler, need)
            return handler

        return register

    @classmethod
    def merged(cls, *registries: Registry) -> Registry:
        """One registry of every entry of ``registries``.

        Raises:
            ValueError: a request class is in two of them.
        """
        merged = cls()
        for registry in registries:
            for request, entry in registry.items():
                if request in merged._entries:
                    msg = f"{request.__name__} has two handlers"
                    raise ValueError(msg)
                merged._entries[request] = entry
        return merged

    def __getitem__(self, request: type[Any]) -> Entry:
        return self._entries[request]

    def __iter__(self) -> Iterator[type[Any]]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, request: object) -> bool:
        return request in self._entries

    def needs(self) -> Mapping[type[Any], Need]:
        """Each request class's need."""
        return {request: entry.need for request, entry in self._entries.items()}
