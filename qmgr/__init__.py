"""qmgr: a transactional queue manager.

Layers (imports go one way only):

* ``wire``            pure packet and frame formats (no I/O)
* ``storage``         synchronous LMDB store (no trio)
* ``qmgr.core``       sans-IO queue-manager semantics: names, transactions, holds
* ``qmgr.server``     the trio daemon: listeners, client sessions, the committer
* ``qmgr.client``     the SDK (blocking and trio) speaking the client protocol
* ``qmgr.cli``        the ``qmgr`` command

``qmgr.core`` never imports trio and never touches sockets or the clock; the
trio layer is a thin adapter that wires the core, the store and the wire
formats together.
"""

from __future__ import annotations

__version__ = "0.1.0"
