"""The README's examples run as written (against a daemon of their own)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from helpers import DaemonProcess, free_port, run_python, run_qmgr, wait_until

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_examples_run(daemon: DaemonProcess) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        code = block.replace("127.0.0.1:1802", daemon.address)
        result = run_python(code)
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


def test_readme_two_queue_managers_run_as_written(tmp_path: Path) -> None:
    """The "Between queue managers" walkthrough: its two ``qmgr serve`` lines (each
    with its own ports, the HTTP listener's included), then its commands, with the
    ports moved to free ones and the data under the test's directory."""
    text = README.read_text(encoding="utf-8")
    section = text.split("### Between queue managers", 1)[1].split("```sh\n", 1)[1]
    lines = [line.split("  #", 1)[0].strip() for line in section.split("```", 1)[0].splitlines()]
    ports = sorted(set(re.findall(r"127\.0\.0\.1:(\d+)", "\n".join(lines))))
    moved = {port: str(free_port()) for port in ports}

    def rewrite(line: str) -> str:
        line = re.sub(r"127\.0\.0\.1:(\d+)", lambda m: f"127.0.0.1:{moved[m.group(1)]}", line)
        return line.replace("var/", f"{tmp_path}/")

    serving = [rewrite(line).removesuffix("&").strip() for line in lines if " serve " in line]
    commands = [rewrite(line) for line in lines if line and " serve " not in line]
    assert len(serving) == 2
    assert len(commands) >= 3
    logs = [tmp_path / f"serve-{n}.log" for n in range(len(serving))]
    daemons = []
    for line, log in zip(serving, logs, strict=True):
        with log.open("wb") as stderr:
            daemons.append(
                subprocess.Popen(
                    [sys.executable, "-m", "qmgr", *_split(line[len("qmgr ") :])],
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                )
            )
    try:
        for line, daemon, log in zip(serving, daemons, logs, strict=True):
            client = re.search(r"--client-listen (\S+)", line)
            assert client is not None

            def answers(
                address: str = client.group(1),
                process: subprocess.Popen[bytes] = daemon,
                log: Path = log,
            ) -> bool:
                assert process.poll() is None, log.read_text()
                return bool(run_qmgr("--server", address, "status").returncode == 0)

            wait_until(answers, timeout=30)
        for command in commands:
            result = run_qmgr(*_split(command[len("qmgr ") :]))
            assert result.returncode == 0, f"{command}\n---\n{result.stderr}"
            if " receive " in command:
                assert "to B" in result.stdout
    finally:
        for daemon in daemons:
            daemon.terminate()
        for daemon in daemons:
            daemon.wait(timeout=30)
