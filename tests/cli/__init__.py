"""Tests of the ``qmgr`` command (``qmgr/cli/``).

A package, as ``tests/protocol`` is, so that its modules may share their
names with tests elsewhere (``test_poison``, ``test_queues``, ...).
"""
