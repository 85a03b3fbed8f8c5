"""What each part of the daemon takes from the configuration, in one table.

The configuration (``qmgr.config.Config``) is flat, named as the TOML file
names its keys; the parts take values of their own (the core's
:class:`~qmgr.core.limits.Limits`, a client connection's
:class:`~.client.services.ConnectionLimits`, a peer session's
:class:`~qmgr.protocol.SessionSettings`). :data:`SOURCES` says, for each,
which configuration attribute every field comes from, and
:func:`from_config` builds one: the mapping is written once, and a field
added to a part's settings without a source keeps its default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from qmgr.config import Config
from qmgr.core.limits import Limits
from qmgr.protocol import SessionSettings

from .client.services import ConnectionLimits

__all__ = ["SOURCES", "from_config"]

T = TypeVar("T")

#: For each kind of settings: its fields, and the configuration attribute each comes from.
SOURCES: Final[Mapping[Callable[..., Any], Mapping[str, str]]] = {
    Limits: {
        "max_transaction_operations": "tx_max_operations",
        "max_transaction_bytes": "tx_max_bytes",
        "max_uncommitted_bytes": "max_uncommitted_bytes",
        "max_prepared": "tx_max_prepared",
        "outcome_retention": "tx_outcome_retention",
    },
    ConnectionLimits: {
        "hello_timeout": "hello_timeout",
        "frame_timeout": "frame_timeout",
        "idle_timeout": "idle_timeout",
        "max_transactions": "max_transactions_per_connection",
        "max_waiting_receives": "max_waiting_receives_per_connection",
    },
    SessionSettings: {
        "window_size": "peer_window",
        "ack_timeout": "peer_ack_timeout",
        "recoverable_ack_timeout": "peer_recoverable_ack_timeout",
        "init_timeout": "peer_init_timeout",
        "idle_timeout": "peer_idle_timeout",
    },
}


def from_config(kind: Callable[..., T], config: Config, **values: Any) -> T:
    """``kind`` with the fields :data:`SOURCES` names taken from ``config``, and
    ``values`` for those that need more than a copy."""
    copied = {field: getattr(config, source) for field, source in SOURCES[kind].items()}
    return kind(**copied, **values)
