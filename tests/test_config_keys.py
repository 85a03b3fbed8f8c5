"""The table of configuration keys: every key sets one Config attribute, the
embedded defaults give every key a value its check accepts, and each check
draws its line where the documentation says."""

from __future__ import annotations

import dataclasses
import tomllib
from typing import Any

import pytest

from qmgr.config import Config, default_config_text
from qmgr.config_keys import KEYS, ROUTES_SECTION


def test_every_key_sets_its_own_config_attribute() -> None:
    attributes = [key.attribute for key in KEYS.values()]
    assert len(attributes) == len(set(attributes))
    fields = {field.name for field in dataclasses.fields(Config)}
    assert set(attributes) <= fields
    # The one attribute no key sets is the [routes] section, read apart.
    assert fields - set(attributes) == {"routes"}
    assert all(section != ROUTES_SECTION for section, _ in KEYS)


def test_the_embedded_defaults_hold_every_key_with_a_value_its_check_accepts() -> None:
    defaults = tomllib.loads(default_config_text())
    given = {
        (section, key): value
        for section, table in defaults.items()
        if section != ROUTES_SECTION
        for key, value in table.items()
    }
    assert set(given) == set(KEYS)
    for name, value in given.items():
        spec = KEYS[name]
        assert isinstance(value, spec.kind), name
        if spec.check is not None:
            assert spec.check(value) is None, name


@pytest.mark.parametrize(
    ("section", "key", "good", "bad", "says"),
    [
        ("server", "max_connections", [1, 10**6], [0, -1], "must be positive"),
        ("server", "evictable_after", [0.0, 5.0], [-0.5], "must not be negative"),
        ("peers", "ping_port", [1, 65535], [0, 65536], "must be a port, 1 to 65535"),
        ("peers", "window", [1, 0xFFFF], [0, 0x10000], "must be 1..65535"),
        ("peers", "ack_timeout", [0.001, 4294967], [0, 4294968], "at most 4294967 seconds"),
        ("peers", "outgoing_cleanup_after", [0, 1, 3600], [0.5, -1], "0 (never) or at least 1 s"),
        ("peers", "max_packet_size", [1024], [1023], "bytes"),
        ("transactions", "xact_delay_receive_nack", [-1, 0, 2.5], [-0.5, -2], "-1 (unset)"),
        ("store", "initial_map_size", [1 << 20, 1 << 46], [(1 << 20) - 1, (1 << 46) + 1], "1 MiB"),
        ("store", "max_map_size", [0, 1 << 20], [1, (1 << 46) + 1], "1 MiB"),
        ("store", "reserve_size", [0, 1 << 46], [-1, (1 << 46) + 1], "64 TiB"),
        ("log", "format", ["auto", "console", "json"], ["text", ""], "must be one of auto"),
        ("tls", "min_version", ["1.2", "1.3"], ["1.1", 1.3], "must be one of 1.2, 1.3"),
        ("server", "data_dir", ["/var/lib/qmgr"], ["", "   "], "must not be empty"),
        ("server", "name", ["", "qm-1.example", "b_2"], ["a b", "x" * 254, "-"], "host name"),
        ("server", "aliases", [[], ["a", "b:1801"]], [["a", 5]], "not holding 5"),
        (
            "peers",
            "resend_intervals",
            [[30, 0.5]],
            [[], [0], [True], [float("inf")], ["30"]],
            "non-empty list of positive, finite",
        ),
        (
            "auth",
            "groups",
            [{}, {"ops": ["alice", "bob"]}],
            [{"ops": "alice"}, {"ops": ["alice", 3]}],
            "must map each group to a list of names",
        ),
    ],
)
def test_each_check_accepts_and_refuses_where_it_says(
    section: str, key: str, good: list[Any], bad: list[Any], says: str
) -> None:
    check = KEYS[(section, key)].check
    assert check is not None
    for value in good:
        assert check(value) is None, value
    for value in bad:
        problem = check(value)
        assert problem is not None, value
        assert says in problem, problem
