"""The core's errors as the client protocol's error codes: every error class has its
code, a subclass takes its base's, and an error frame carries the message."""

from __future__ import annotations

import inspect

import pytest

from qmgr.core import errors
from qmgr.server.client.error_codes import ERROR_CODES, error_code, error_frame
from wire import client as cf


def test_every_error_class_of_the_core_has_a_code() -> None:
    classes = {
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.QueueManagerError) and cls is not errors.QueueManagerError
    }
    listed = set(ERROR_CODES)
    for cls in classes - listed:  # a narrower error, carried as its base
        assert any(base in listed for base in cls.__mro__[1:]), cls
    assert error_code(errors.MessageNotFound("gone")) == cf.ErrorCode.QUEUE_NOT_FOUND
    assert len(set(ERROR_CODES.values())) == len(ERROR_CODES)  # one class per code


def test_a_subclass_takes_the_code_of_its_base_and_an_unknown_error_is_internal() -> None:
    class Narrower(errors.QueueNotFound):
        pass

    assert error_code(Narrower("gone")) == cf.ErrorCode.QUEUE_NOT_FOUND
    assert error_code(errors.QueueManagerError("?")) == cf.ErrorCode.INTERNAL


@pytest.mark.parametrize(("cls", "code"), list(ERROR_CODES.items()))
def test_an_error_frame_carries_the_code_and_the_message(
    cls: type[errors.QueueManagerError], code: cf.ErrorCode
) -> None:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(error_frame(9, cls("what went wrong")))
    assert decoder.next_frame() == cf.Frame(
        request_id=9, value=cf.ErrorReply(code=code, message="what went wrong")
    )
