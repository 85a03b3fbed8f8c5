"""What each part of the daemon takes from the configuration (``qmgr.server.settings``):
every source the table names is a setting of the configuration and every field one of the
part's, ``from_config`` copies each from its source, and the fields it does not name keep
their defaults or come from the caller."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from qmgr.config import Config, load_config
from qmgr.core.limits import Limits
from qmgr.protocol import SessionSettings
from qmgr.server.client.services import ConnectionLimits
from qmgr.server.settings import SOURCES, from_config

KINDS = [Limits, ConnectionLimits, SessionSettings]


def names(kind: Any) -> set[str]:
    return {field.name for field in dataclasses.fields(kind)}


def test_the_table_names_real_fields_and_settings() -> None:
    assert list(SOURCES) == KINDS
    for kind, sources in SOURCES.items():
        assert set(sources) <= names(kind), kind
        assert set(sources.values()) <= names(Config), kind
        assert len(set(sources.values())) == len(sources), kind  # one setting, one field


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
def test_each_field_is_copied_from_its_setting(kind: Any) -> None:
    defaults = kind()
    config = load_config()
    # A value of its own for every setting the table names, none of them a default.
    changed = dataclasses.replace(
        config,
        **{
            source: type(getattr(defaults, field))(getattr(defaults, field) * 2 + number)
            for number, (field, source) in enumerate(SOURCES[kind].items(), start=1)
        },
    )
    built = from_config(kind, changed)
    assert type(built) is kind
    for field, source in SOURCES[kind].items():
        assert getattr(built, field) == getattr(changed, source) != getattr(defaults, field)
    for field in names(kind) - set(SOURCES[kind]):
        assert getattr(built, field) == getattr(defaults, field)


def test_values_the_table_does_not_name_come_from_the_caller() -> None:
    limits = from_config(Limits, load_config(), xact_delay_receive_nack=2.5)
    assert limits.xact_delay_receive_nack == 2.5
    with pytest.raises(TypeError, match="max_transaction_operations"):
        from_config(Limits, load_config(), max_transaction_operations=1)
