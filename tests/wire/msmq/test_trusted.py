"""Trusted constructors: the same values as ``__init__`` makes, without its checks."""

from __future__ import annotations

import dataclasses

import pytest

import wire
from wire.msmq.trusted import new, trusted_constructor


def test_a_trusted_value_equals_the_initialised_one() -> None:
    made = new.TxSequenceId(ordinal=1, timestamp=2)
    assert made == wire.TxSequenceId(ordinal=1, timestamp=2)
    assert hash(made) == hash(wire.TxSequenceId(ordinal=1, timestamp=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.ordinal = 3  # type: ignore[misc]


def test_every_field_is_required() -> None:
    with pytest.raises(TypeError):
        new.TxSequenceId(ordinal=1)


def test_only_slotted_dataclasses_without_post_init() -> None:
    @dataclasses.dataclass(frozen=True)
    class Plain:
        value: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="slotted"):
        trusted_constructor(Plain)
    with pytest.raises(TypeError, match="__post_init__"):
        trusted_constructor(Checked)
