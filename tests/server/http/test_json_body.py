"""What the API takes as a body (``json_body``): JSON said by its Content-Type,
one object giving each key once at every depth, and values repeated in error
messages cut short."""

from __future__ import annotations

import pytest

from qmgr.server.http.json_body import (
    SHOWN,
    BodyProblem,
    content_type_problem,
    json_object,
    shown_number,
    shown_text,
)


@pytest.mark.parametrize(
    "value",
    [
        "application/json",
        "Application/JSON",
        " application/json ",
        "application/json; charset=utf-8",
        'application/json;charset="UTF-8"',
        "application/json; charset=utf8; profile=x",
    ],
)
def test_json_in_utf_8_is_taken(value: str) -> None:
    assert content_type_problem(value) is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (None, "it has none"),
        ("text/plain", "not 'text/plain'"),
        ("application/x-www-form-urlencoded", "not 'application/x-www-form-urlencoded'"),
        ("multipart/form-data; boundary=x", "not 'multipart/form-data'"),
        ("application/jsonp", "not 'application/jsonp'"),
        ("application/json; charset=utf-16", "in UTF-8, not 'utf-16'"),
        ("x" * 100, f"not {'x' * SHOWN!r}... (100 characters)"),
    ],
)
def test_anything_else_says_what_it_is(value: str | None, problem: str) -> None:
    assert content_type_problem(value) == problem


def test_an_object_is_taken_with_each_key_once() -> None:
    assert json_object(b'{"to": "q", "x": {"a": 1, "b": [{"a": 2}]}}') == {
        "to": "q",
        "x": {"a": 1, "b": [{"a": 2}]},
    }


@pytest.mark.parametrize(
    ("data", "key"),
    [
        (b'{"lookup_id": 1, "lookup_id": 2}', "lookup_id"),
        (b'{"all": true, "to": "q", "all": false}', "all"),
        (b'{"x": {"a": 1, "a": 1}}', "a"),
        (b'{"x": [{"deep": {"k": 1, "k": 2}}]}', "k"),
    ],
)
def test_a_key_given_twice_is_refused_at_any_depth(data: bytes, key: str) -> None:
    with pytest.raises(BodyProblem) as refused:
        json_object(data)
    assert refused.value.message == f"the body gives the key {key!r} more than once in an object"


def test_a_long_key_given_twice_is_not_repeated_whole() -> None:
    key = "k" * 5000
    with pytest.raises(BodyProblem) as refused:
        json_object(f'{{"{key}": 1, "{key}": 2}}'.encode())
    assert len(refused.value.message) < 120
    assert "(5000 characters)" in refused.value.message


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "the body is not JSON"),
        (b"[1]", "the body must be a JSON object"),
        (b"[" * 100_000, "the body is not JSON"),
        (b'{"n": ' + b"9" * 5000 + b"}", "the body has a number too long"),
    ],
)
def test_what_is_not_one_object_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(BodyProblem) as refused:
        json_object(data)
    assert refused.value.message == message


def test_values_in_messages_are_cut_at_their_bound() -> None:
    assert shown_number(12345) == "12345"
    assert shown_number(10**39) == str(10**39)  # 40 digits
    assert shown_number(10**40) == "a number of 41 digits"
    assert shown_number(-(10**4000)) == "a number of 4002 digits"
    assert shown_text("abc") == "'abc'"
    assert shown_text("y" * 41) == f"{'y' * SHOWN!r}... (41 characters)"
