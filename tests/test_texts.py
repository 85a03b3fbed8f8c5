"""Byte counts, durations and counted nouns as the CLI and the console show them."""

from __future__ import annotations

import pytest

from qmgr.texts import age, plural, size


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (10 * 1024**2, "10.0 MiB"),
        (3 * 1024**3, "3.0 GiB"),
        (2 * 1024**4, "2.0 TiB"),
        # Past TiB the count stays in TiB rather than running out of units.
        (5 * 1024**5, "5120.0 TiB"),
    ],
)
def test_sizes_use_binary_units(value: int, shown: str) -> None:
    assert size(value) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0s"),
        (42.9, "42s"),
        (60, "1m00s"),
        (192, "3m12s"),
        (3599, "59m59s"),
        (3600 * 2 + 5 * 60, "2h05m"),
        (86399, "23h59m"),
        (86400 * 3 + 3600 * 4 + 59, "3d04h"),
    ],
)
def test_ages_show_the_two_largest_units(seconds: float, shown: str) -> None:
    assert age(seconds) == shown


def test_plural_adds_s_except_for_one() -> None:
    assert plural(1, "message") == "1 message"
    assert plural(0, "message") == "0 messages"
    assert plural(2, "queue") == "2 queues"
