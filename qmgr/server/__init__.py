"""The trio daemon: listeners, client sessions, the committer, timers.

Layering rule: this is the only package (with the CLI and the SDK) that uses
trio. It adapts ``qmgr.core`` (semantics), ``storage`` (LMDB) and ``wire``
(frames) to sockets and time, and adds nothing they could hold themselves.
"""

from __future__ import annotations

from .daemon import Daemon as Daemon
from .daemon import StartupError as StartupError
from .daemon import serve as serve

__all__ = ["Daemon", "StartupError", "serve"]
