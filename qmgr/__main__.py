"""``python -m qmgr`` is the ``qmgr`` command."""

from __future__ import annotations

from qmgr.cli import main

if __name__ == "__main__":
    main()
