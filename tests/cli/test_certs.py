"""How ``qmgr certs show`` words a certificate's validity (``qmgr/cli/certs.py``).

The commands themselves (init, issue, show) run in
``tests/integration/test_cli_certs.py``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from qmgr.certs import CertInfo
from qmgr.cli import certs

NOW = dt.datetime(2024, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (dt.timedelta(seconds=59), "less than a minute"),
        (dt.timedelta(minutes=1), "1 minute"),
        (dt.timedelta(minutes=59, seconds=59), "59 minutes"),
        (dt.timedelta(hours=1), "1 hour"),
        (dt.timedelta(hours=23), "23 hours"),
        (dt.timedelta(hours=47), "1 day"),
        (dt.timedelta(days=2), "2 days"),
        (dt.timedelta(days=824, hours=23), "824 days"),
    ],
)
def test_span_is_the_largest_whole_unit(delta: dt.timedelta, text: str) -> None:
    assert certs._span(delta) == text


def _info(not_before: dt.datetime, not_after: dt.datetime, validity: str) -> CertInfo:
    return CertInfo(
        path=Path("qm.crt"),
        subject="qm",
        issuer="ca",
        kind="qm",
        serial=1,
        not_before=not_before,
        not_after=not_after,
        dns_names=(),
        ip_addresses=(),
        sha256_fingerprint="AA",
        validity=validity,  # type: ignore[arg-type]
    )


def test_status_says_how_long_a_certificate_is_valid_or_since_when_not() -> None:
    valid = _info(NOW - dt.timedelta(days=1), NOW + dt.timedelta(days=3), "valid")
    assert certs._status(valid, NOW) == "valid, expires in 3 days (2024-06-04 12:00 UTC)"
    expired = _info(NOW - dt.timedelta(days=9), NOW - dt.timedelta(hours=5), "expired")
    assert certs._status(expired, NOW) == "expired 5 hours ago (2024-06-01 07:00 UTC)"
    early = _info(NOW + dt.timedelta(minutes=30), NOW + dt.timedelta(days=9), "not yet valid")
    assert certs._status(early, NOW) == (
        "not yet valid: valid in 30 minutes (2024-06-01 12:30 UTC)"
    )
