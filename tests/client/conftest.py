"""Fixtures of the client tests: a scripted daemon on a real port.

The sample values the daemon answers with, and the tests compare with, are those of
the wire tests (``tests/wire/wire_samples.py``): their folder joins ``sys.path``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent / "wire"))

# The fixture ``fake_daemon``, shared with the CLI's tests.
from fake_daemon import fake_daemon  # noqa: F401
