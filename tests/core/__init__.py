"""Tests of ``qmgr.core``: a module per module of the package (``test_<module>.py``),
with feature and model tests beside them; ``harness`` runs a core over a real store."""
