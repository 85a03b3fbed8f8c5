"""Tests of the daemon's background workers (``qmgr.server.workers``): a package, so that
their module names may repeat others' (``test_poison``)."""
