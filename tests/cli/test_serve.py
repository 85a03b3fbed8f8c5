"""``qmgr serve``'s configuration errors, in-process (nothing starts).

The daemon itself, its start-up errors and its signals run as subprocesses in
``tests/integration/test_cli.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .kit import run


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--set", "nonsense"], "error: --set 'nonsense': expected SECTION.KEY=VALUE"),
        (["--set", "server.nmae=1"], "error: --set: unknown key server.nmae"),
        (["--listen", "nohostport"], "error: server.listen: expected HOST:PORT, got 'nohostport'"),
        (
            ["--config", "/nonexistent/qmgr.toml"],
            "error: cannot read config file /nonexistent/qmgr.toml: No such file or directory",
        ),
    ],
    ids=["not a setting", "unknown key", "bad address", "no config file"],
)
def test_a_configuration_error_exits_2(tmp_path: Path, args: list[str], error: str) -> None:
    data = tmp_path / "data"
    result = run(None, "serve", "--data-dir", str(data), *args)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [error]
    assert result.stdout == ""
    assert not data.exists()


def test_a_bad_choice_is_a_usage_error() -> None:
    result = run(None, "serve", "--log-format", "xml")
    assert result.exit_code == 2
    assert "Invalid value for '--log-format'" in result.stderr
