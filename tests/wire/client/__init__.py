"""Tests of ``wire.client``, the client protocol: one module per module of the package.

A package, so that its module names (``client.test_poison``, ...) do not collide
with those of other test folders; its helpers are imported relatively.
"""
