"""The core's bounds (``qmgr.core.limits``): its defaults are the shipped configuration's."""

from __future__ import annotations

from qmgr.config import load_config
from qmgr.core.limits import Limits


def test_the_defaults_are_those_of_the_default_configuration() -> None:
    config = load_config()
    limits = Limits()
    assert limits.max_transaction_operations == config.tx_max_operations
    assert limits.max_transaction_bytes == config.tx_max_bytes
    assert limits.max_uncommitted_bytes == config.max_uncommitted_bytes
    assert limits.max_prepared == config.tx_max_prepared
    assert limits.outcome_retention == config.tx_outcome_retention
    # Unset (negative in the configuration): MSMQ's rule.
    assert limits.xact_delay_receive_nack is None
    assert config.tx_xact_delay_receive_nack < 0
