"""The README's examples run as written (against a daemon of their own)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from helpers import DaemonProcess, run_qmgr

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_examples_run(daemon: DaemonProcess) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        code = block.replace("127.0.0.1:1802", daemon.address)
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
        assert result.returncode == 0, f"{block}\n---\n{result.stderr}"


def test_readme_cli_walkthrough_runs(daemon: DaemonProcess) -> None:
    text = README.read_text(encoding="utf-8")
    section = (
        text.split("### With the command line", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    )
    commands = [line.split("#", 1)[0].strip() for line in section.splitlines()]
    for command in filter(None, commands):
        assert command.startswith("qmgr ")
        result = run_qmgr("--server", daemon.address, *_split(command[len("qmgr ") :]))
        assert result.returncode == 0, f"{command}\n---\n{result.stderr}"


def _split(text: str) -> list[str]:
    import shlex

    return shlex.split(text)
