"""Queue-manager semantics: names, transactions, holds, sends; it decides, the writer writes.

Layering rule: this package imports ``wire`` (values only) and ``storage``
(it reads the store and builds its write units), never ``trio``, sockets,
the clock or a logger. Every change it wants is a ``storage.Unit`` it
returns; the daemon (``qmgr.server``) writes the unit through its one writer
and hands the outcome back. Every method that needs the time takes it as an
argument. Nothing here knows how errors travel on a protocol: the daemon
maps this package's errors to reply codes.

Modules: ``engine`` (the core itself), ``transactions``, ``locks`` (held
messages), ``sends`` (checks on a message and its send mode),
``addressing`` (format names to destination queues), ``ordinals``
(message ids), ``budget`` (memory budgets), ``names``, ``errors``.
"""

from __future__ import annotations
