"""The error tree both formats share."""

from __future__ import annotations

import pytest

import wire


def test_errors_share_one_base() -> None:
    assert issubclass(wire.RemoteProtocolError, wire.ProtocolError)
    assert issubclass(wire.LocalProtocolError, wire.ProtocolError)
    with pytest.raises(TypeError):
        wire.ProtocolError("abstract")


def test_an_error_names_its_field_first() -> None:
    error = wire.RemoteProtocolError("too short", field="BaseHeader")
    assert (error.message, error.field, str(error)) == (
        "too short",
        "BaseHeader",
        "BaseHeader: too short",
    )
    assert str(wire.LocalProtocolError("cannot encode")) == "cannot encode"
    assert wire.LocalProtocolError("cannot encode").field is None
