"""``python -m qmgr.cli`` is the ``qmgr`` command, as ``python -m qmgr`` is."""

from __future__ import annotations

from . import main

if __name__ == "__main__":
    main()
