"""Tests of ``wire.msmq``, the MSMQ session packets: one module per module of the
package, and the feature tests of the codec as a whole (golden frames, round trips,
the invariant on malformed input).

A package, so that its module names (``msmq.test_decoder``, ...) do not collide
with those of other test folders; its helpers are imported relatively (the fuzz
harness and the benchmark import them as ``msmq.msmq_samples``).
"""
