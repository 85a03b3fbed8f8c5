"""The trio daemon: listeners, client sessions, the committer and its writer, timers.

Layering rule: this is the only package (with the CLI and the SDK) that uses
trio. It adapts ``qmgr.core`` (which decides), ``storage`` (LMDB) and
``wire`` (frames) to sockets, threads and time, and adds nothing they could
hold themselves. Every write to the store goes through the one
:class:`~qmgr.server.committer.Committer` and its writer; no other code
here writes.
"""

from __future__ import annotations

from .daemon import Daemon as Daemon
from .daemon import serve as serve
from .listeners import ConfigurationError as ConfigurationError
from .listeners import StartupError as StartupError

__all__ = ["ConfigurationError", "Daemon", "StartupError", "serve"]
