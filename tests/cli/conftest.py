"""Fixtures of the command-line tests.

The commands run in-process with click's runner. They talk to a scripted
daemon on a real port (:class:`fake_daemon.FakeDaemon`, shared with the SDK's
tests, beside which it lives in ``tests/client``, answering with the sample values
of ``tests/wire/wire_samples.py``), or, where a command needs
a real queue manager, to the session's ``shared_daemon``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent / "client"))
sys.path.append(str(Path(__file__).resolve().parent.parent / "wire"))

# The fixture ``fake_daemon``, shared with the SDK's tests.
from fake_daemon import fake_daemon  # noqa: F401
