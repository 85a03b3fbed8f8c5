"""Tests of ``qmgr.client.calls``: each call run against scripted replies, without I/O.

A package (``calls.test_*``), so that its module names never clash with the
suite's other ``test_queues.py``, ``test_poison.py``, ... files.
"""
