"""The data source's options: parsing, checking, and connecting with them.

Spark hands a data source its options as strings in a case-insensitive
mapping, together with options of its own (``path``, ``checkpointLocation``,
``queryName``). :meth:`Options.parse` checks ours and says exactly what is
wrong; an unknown name that is close to one of ours is taken for a typo and
refused, other unknown names are Spark's and are ignored.

Nothing here imports pyspark, so the checks run (and are tested) anywhere.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final, TypeVar

from wire.addresses import AddressError, split_host_port

if TYPE_CHECKING:
    from qmgr.client import QueueManager

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_PARTITIONS", "DataSourceError", "Options"]

#: Seconds allowed for reaching the queue manager unless ``connectTimeout`` says otherwise.
DEFAULT_CONNECT_TIMEOUT: Final = 10.0
#: Read partitions (tasks) per batch or micro-batch unless ``partitions`` says otherwise.
DEFAULT_PARTITIONS: Final = 2
#: Largest ``partitions``: each partition is a task and a connection.
MAX_PARTITIONS: Final = 1024

#: Our options: lower-case name -> the name as documented.
NAMES: Final = {
    name.lower(): name
    for name in (
        "endpoint",
        "endpoints",
        "queue",
        "maxMessagesPerTrigger",
        "removeOnCommit",
        "partitions",
        "connectTimeout",
        "token",
        "tlsCa",
        "tlsCert",
        "tlsKey",
    )
}
_TRUE: Final = frozenset({"true", "yes", "1"})
_FALSE: Final = frozenset({"false", "no", "0"})

#: What an option's text converts to, and the type of its default.
N = TypeVar("N")
D = TypeVar("D")


class DataSourceError(ValueError):
    """A wrong or missing option, or a queue manager or queue that cannot be used.

    Raised on the driver while Spark plans the query, so the query fails at
    once with this message instead of hanging or failing in a task.
    """

    def __init__(self, message: str) -> None:
        super().__init__(f"qmgr data source: {message}")


@dataclass(frozen=True, slots=True)
class Options:
    """The checked options of one ``spark.read/readStream/write/writeStream.format("qmgr")``.

    Attributes:
        endpoint: ``HOST:PORT`` of a queue manager's client listener (with
            ``endpoints``, the first of them).
        queue: the queue to read, or to write rows without a ``destination``.
        max_messages_per_trigger: most messages per micro-batch, or None for
            every message available.
        remove_on_commit: a streaming read removes the messages of a
            micro-batch once Spark has committed it.
        partitions: read tasks per batch or micro-batch.
        connect_timeout: seconds allowed for connecting to the queue manager.
        token: a token to authenticate with (``qmgr auth token``), or None.
        tls_ca, tls_cert, tls_key: connect over TLS trusting the CA bundle
            ``tls_ca``, with the client certificate ``tls_cert`` and its key
            (PEM files that must exist on the driver and on every executor).
        fleet: the queue managers of the option ``endpoints``, whose queues
            a read reads together; empty when ``endpoint`` was given.
    """

    endpoint: str
    queue: str | None = None
    max_messages_per_trigger: int | None = None
    remove_on_commit: bool = True
    partitions: int = DEFAULT_PARTITIONS
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    token: str | None = field(default=None, repr=False)
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    fleet: tuple[str, ...] = ()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Options:
        """Check Spark's option mapping (case-insensitive names, string values).

        Raises:
            DataSourceError: an option is missing, misspelt, or has a wrong value.
        """
        values = {str(key).lower(): value for key, value in options.items()}
        for key in values:
            if key in NAMES:
                continue
            close = difflib.get_close_matches(key, NAMES, n=1, cutoff=0.8)
            if close:
                msg = f"unknown option {key!r}; did you mean {NAMES[close[0]]!r}?"
                raise DataSourceError(msg)
        endpoint = _text(values, "endpoint")
        endpoints = _text(values, "endpoints")
        if endpoint is not None and endpoints is not None:
            msg = (
                "give the option 'endpoint' (one queue manager) or 'endpoints' (a queue "
                "read on several), not both"
            )
            raise DataSourceError(msg)
        fleet = () if endpoints is None else _fleet(endpoints)
        if endpoint is None and not fleet:
            msg = (
                "the option 'endpoint' is required: HOST:PORT of a queue manager's client "
                "listener, as in .option('endpoint', '127.0.0.1:1802') (or 'endpoints', "
                "HOST:PORT,HOST:PORT,..., to read a queue on several queue managers)"
            )
            raise DataSourceError(msg)
        if _text(values, "tlskey") is not None and _text(values, "tlscert") is None:
            msg = (
                "the option 'tlsKey' is the key of the client certificate 'tlsCert', "
                "which was not given (add 'tlsCert', and 'tlsCa' for the queue manager's CA)"
            )
            raise DataSourceError(msg)
        return cls(
            endpoint=fleet[0] if fleet else _endpoint(str(endpoint)),
            fleet=fleet,
            queue=_text(values, "queue"),
            max_messages_per_trigger=_integer(values, "maxmessagespertrigger", minimum=1),
            remove_on_commit=_boolean(values, "removeoncommit", default=True),
            partitions=_integer(
                values, "partitions", minimum=1, maximum=MAX_PARTITIONS, default=DEFAULT_PARTITIONS
            )
            or DEFAULT_PARTITIONS,
            connect_timeout=_seconds(values, "connecttimeout", DEFAULT_CONNECT_TIMEOUT),
            token=_text(values, "token"),
            tls_ca=_text(values, "tlsca"),
            tls_cert=_text(values, "tlscert"),
            tls_key=_text(values, "tlskey"),
        )

    @property
    def members(self) -> tuple[str, ...]:
        """The queue managers a read reads: those of ``endpoints``, or ``endpoint``."""
        return self.fleet or (self.endpoint,)

    def at(self, endpoint: str) -> Options:
        """These options for the queue manager at ``endpoint`` alone."""
        if endpoint == self.endpoint and not self.fleet:
            return self
        return replace(self, endpoint=endpoint, fleet=())

    def require_one(self, purpose: str) -> None:
        """Check that these options name one queue manager, as ``purpose`` needs.

        Raises:
            DataSourceError: they name several (``endpoints``).
        """
        if self.fleet:
            msg = (
                f"the option 'endpoints' is for reads; {purpose} goes through one queue "
                "manager, the option 'endpoint' (it reaches queues on others by format "
                "names: DIRECT=TCP:HOST:PORT\\private$\\QUEUE)"
            )
            raise DataSourceError(msg)

    def require_queue(self, purpose: str) -> str:
        """The ``queue`` option, which ``purpose`` needs.

        Raises:
            DataSourceError: it was not given.
        """
        if self.queue is None:
            msg = f"the option 'queue' is required {purpose}, as in .option('queue', 'orders')"
            raise DataSourceError(msg)
        return self.queue

    def connect(self) -> QueueManager:
        """Connect to the queue manager within ``connect_timeout``.

        Raises:
            DataSourceError: it cannot be reached (the message says where and why).
        """
        from qmgr.client import AccessDenied, QueueError, connect, tls_context

        try:
            tls = None
            if self.tls_ca is not None or self.tls_cert is not None:
                tls = tls_context(self.tls_ca, certificate=self.tls_cert, key=self.tls_key)
        except ValueError as exc:
            msg = f"the options 'tlsCa', 'tlsCert' and 'tlsKey': {exc}"
            raise DataSourceError(msg) from None
        try:
            return connect(
                self.endpoint,
                timeout=self.connect_timeout,
                client_name="spark",
                tls=tls,
                token=self.token,
            )
        except AccessDenied as exc:
            # Reached, and it refused who we said we are: not a matter of time.
            msg = (
                f"the queue manager at {self.endpoint} refused the connection's credential "
                f"(the option 'token', or 'tlsCert' and 'tlsKey'): {exc}"
            )
            raise DataSourceError(msg) from None
        except QueueError as exc:
            # The client says why (refused, no answer in time, a failed handshake).
            text = exc.message
            if "no answer within" in text or "timed out" in text:
                text += f" (within {self.connect_timeout:g} s: the option 'connectTimeout')"
            elif tls is None and "handshake" in text:
                text += " (if its client port speaks TLS, give the option 'tlsCa')"
            raise DataSourceError(text) from None


def _text(values: Mapping[str, str], key: str) -> str | None:
    value = values.get(key)
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        msg = f"the option {NAMES[key]!r} is empty"
        raise DataSourceError(msg)
    return text


def _endpoint(text: str, option: str = "endpoint") -> str:
    try:
        host, port = split_host_port(text)  # the daemon's and the SDK's rule
    except AddressError:
        host, port = "", None
    if not host or port is None:
        what = "HOST:PORT" if option == "endpoint" else "HOST:PORT,HOST:PORT,... each"
        msg = (
            f"the option {option!r} must be {what} with a port from 1 to 65535 "
            f"(a queue manager's client listener, such as 127.0.0.1:1802), not {text!r}"
        )
        raise DataSourceError(msg)
    return text


def _fleet(text: str) -> tuple[str, ...]:
    """The queue managers of ``endpoints``: comma-separated ``HOST:PORT``, each once."""
    fleet: list[str] = []
    for item in text.split(","):
        endpoint = _endpoint(item.strip(), "endpoints")
        if endpoint in fleet:
            msg = f"the option 'endpoints' names {endpoint} twice"
            raise DataSourceError(msg)
        fleet.append(endpoint)
    return tuple(fleet)


def _integer(
    values: Mapping[str, str],
    key: str,
    *,
    minimum: int,
    maximum: int | None = None,
    default: int | None = None,
) -> int | None:
    bounds = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"

    def within(value: int) -> bool:
        return value >= minimum and (maximum is None or value <= maximum)

    return _converted(values, key, default, int, within, f"an integer {bounds}")


def _boolean(values: Mapping[str, str], key: str, *, default: bool) -> bool:
    text = _text(values, key)
    if text is None:
        return default
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    msg = f"the option {NAMES[key]!r} must be true or false, not {text!r}"
    raise DataSourceError(msg)


def _seconds(values: Mapping[str, str], key: str, default: float) -> float:
    def positive(value: float) -> bool:
        return math.isfinite(value) and value > 0

    return _converted(values, key, default, float, positive, "a number of seconds > 0")


def _converted(
    values: Mapping[str, str],
    key: str,
    default: D,
    convert: Callable[[str], N],
    valid: Callable[[N], bool],
    must_be: str,
) -> N | D:
    """The option ``key`` converted (``default`` if absent).

    Raises:
        DataSourceError: the value does not convert, or is not ``valid``
            (the message says what it ``must_be``).
    """
    text = _text(values, key)
    if text is None:
        return default
    try:
        value = convert(text)
    except ValueError:
        pass
    else:
        if valid(value):
            return value
    msg = f"the option {NAMES[key]!r} must be {must_be}, not {text!r}"
    raise DataSourceError(msg)
