"""Sans-IO queue-manager semantics: names, transactions, locks.

Layering rule: this package imports ``wire`` (values only) and ``storage``,
never ``trio``, sockets or the clock. Every method that needs the time takes
``now``; nothing here logs or sleeps. The trio daemon in ``qmgr.server`` is
the only caller.
"""

from __future__ import annotations
