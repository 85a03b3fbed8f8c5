"""Queue-manager semantics: names, transactions, holds, sends; it decides, the writer writes.

Layering rule: this package imports ``wire`` (values only) and ``storage``
(it reads the store and builds its write units), never ``trio``, sockets,
the clock or a logger. Every change it wants is a ``storage.Unit`` it
returns; the daemon (``qmgr.server``) writes the unit through its one writer
and hands the outcome back. Every method that needs the time takes it as an
argument. Nothing here knows how errors travel on a protocol: the daemon
maps this package's errors to reply codes.

Modules: ``engine`` (the core itself: transactions, sends, receives, and the
composition of the parts below; its docstring says who gets what),
``transactions`` (open transactions and how they end), ``holds`` (held
messages and where receives start), ``sends`` and ``send_copies`` (checks on
a message, its send mode, and the operations that put its copies in place),
``addressing`` (format names to destination queues), ``queue_admin``
(creating, deleting, purging, erasing queues), ``ranges`` (LookupId ranges),
``expiry``, ``poison`` (aborted receives and moves between a queue and its
subqueues), ``two_phase`` (global ids, prepared transactions), ``outcomes``
(the reports of a message's fate), ``confirmation`` and ``final_acks`` (the
transaction confirmation process at the source and at the destination),
``arrivals`` (messages from other queue managers), ``outgoing`` (outgoing
queues and their entries), ``lists`` (distribution lists), ``trace``,
``permissions`` and ``tokens``, ``ordinals`` (message ids), ``budget``
(memory budgets), ``limits``, ``names``, ``errors``.

No module imports the module that composes it, not even for typing: each
part receives the state it needs (``engine`` passes it), and the imports
between the modules of this package form no cycle.
"""

from __future__ import annotations
