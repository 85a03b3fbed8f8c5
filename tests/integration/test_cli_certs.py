"""``qmgr certs init|issue|show``, run in-process with click's runner (no daemon needed)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import stat
from pathlib import Path

import pytest
from cli.kit import ok
from click.testing import CliRunner, Result
from pki import sign

from qmgr.cli.certs import certs
from qmgr.core.permissions import user_name_problem


def run(*args: str) -> Result:
    return CliRunner().invoke(certs, list(args))


def refused(result: Result, message: str) -> Result:
    assert result.exit_code == 1, f"exit {result.exit_code}\n{result.output}"
    assert result.stderr.startswith("error: "), result.stderr
    assert message in result.stderr
    return result


@pytest.fixture
def ca_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "ca"
    ok(run("init", "--dir", str(directory)))
    return directory


def show(path: Path) -> dict[str, object]:
    shown: dict[str, object] = json.loads(ok(run("show", str(path), "--json")).stdout)
    return shown


def test_init_writes_the_ca_and_says_what_comes_next(tmp_path: Path) -> None:
    directory = tmp_path / "deployment ca"
    out = ok(run("init", "--dir", str(directory), "--name", "ACME queues", "--days", "365")).stdout
    assert f"wrote {directory / 'ca.key'}" in out
    assert f"wrote {directory / 'ca.crt'}" in out
    assert out.splitlines()[-1] == f"next: qmgr certs issue QM-NAME --host HOST --dir '{directory}'"
    assert stat.S_IMODE(os.stat(directory / "ca.key").st_mode) == 0o600
    shown = show(directory / "ca.crt")
    assert (shown["subject"], shown["issuer"], shown["kind"]) == ("ACME queues",) * 2 + ("ca",)


def test_init_uses_certs_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = ok(run("init"))
    assert sorted(os.listdir("certs")) == ["ca.crt", "ca.key"]
    assert result.stdout.splitlines()[-1] == "next: qmgr certs issue QM-NAME --host HOST"
    ok(run("issue", "qm1", "--host", "localhost"))
    assert sorted(os.listdir("certs")) == ["ca.crt", "ca.key", "qm1.crt", "qm1.key"]


def test_init_keeps_an_existing_ca_unless_forced(ca_dir: Path) -> None:
    before = (ca_dir / "ca.key").read_bytes()
    result = refused(run("init", "--dir", str(ca_dir)), "exist already, not replaced")
    assert "hint: --force replaces them" in result.stderr
    assert (ca_dir / "ca.key").read_bytes() == before
    ok(run("init", "--dir", str(ca_dir), "--force"))
    assert (ca_dir / "ca.key").read_bytes() != before


def test_issue_a_queue_manager_certificate(ca_dir: Path) -> None:
    args = ["issue", "qm1", "--dir", str(ca_dir), "--host", "qm1.example.com", "--host", "::1"]
    out = ok(run(*args, "--days", "90")).stdout
    assert out.startswith("issued the queue manager certificate qm1 for qm1.example.com, ::1,")
    assert f"wrote {ca_dir / 'qm1.key'}" in out
    assert f"wrote {ca_dir / 'qm1.crt'}" in out
    shown = show(ca_dir / "qm1.crt")
    assert shown["subject"] == "qm1"
    assert shown["issuer"] == "qmgr deployment CA"
    assert shown["kind"] == "qm"
    assert (shown["dns_names"], shown["ip_addresses"]) == (["qm1.example.com"], ["::1"])
    assert str(shown["sha256_fingerprint"]).count(":") == 31

    refused(run(*args), "exist already")
    ok(run(*args, "--force"))


def test_issue_a_client_certificate_into_another_directory(ca_dir: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "for-alice"
    out = ok(run("issue", "alice", "--client", "--dir", str(ca_dir), "--out", str(out_dir))).stdout
    assert out.startswith("issued the client certificate alice, valid until ")
    assert f"with {out_dir / 'ca.crt'}" in out
    assert sorted(os.listdir(out_dir)) == ["alice.crt", "alice.key", "ca.crt"]
    shown = show(out_dir / "alice.crt")
    assert (shown["subject"], shown["kind"], shown["dns_names"]) == ("alice", "client", [])


def test_show_prints_for_people(ca_dir: Path) -> None:
    ok(run("issue", "qm1", "--dir", str(ca_dir), "--host", "10.1.2.3"))
    lines = ok(run("show", str(ca_dir / "qm1.crt"))).stdout.splitlines()
    fields = dict(line.split(": ", 1) for line in lines)
    assert fields["subject"].strip() == "qm1"
    assert fields["kind"].strip() == "queue manager (serverAuth, clientAuth)"
    assert fields["hosts"].strip() == "10.1.2.3"
    assert {"valid from", "valid until", "serial", "sha256"} <= fields.keys()
    assert re.fullmatch(
        r"valid, expires in 82[45] days \(\d{4}-\d\d-\d\d \d\d:\d\d UTC\)",
        fields["status"].strip(),
    )
    assert show(ca_dir / "qm1.crt")["validity"] == "valid"


def test_show_says_a_certificate_has_expired_or_is_not_yet_valid(ca_dir: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    ended = now - dt.timedelta(days=3, minutes=1)
    sign(ca_dir, "old", not_before=now - dt.timedelta(days=30), not_after=ended)
    starts = now + dt.timedelta(hours=2, minutes=1)
    sign(ca_dir, "early", not_before=starts, not_after=now + dt.timedelta(days=30))
    expired = dict(
        line.split(": ", 1) for line in ok(run("show", str(ca_dir / "old.crt"))).stdout.splitlines()
    )
    assert expired["status"].strip() == f"expired 3 days ago ({ended:%Y-%m-%d %H:%M} UTC)"
    assert show(ca_dir / "old.crt")["validity"] == "expired"
    early = ok(run("show", str(ca_dir / "early.crt"))).stdout
    assert f"not yet valid: valid in 2 hours ({starts:%Y-%m-%d %H:%M} UTC)" in early
    assert show(ca_dir / "early.crt")["validity"] == "not yet valid"


def test_errors(ca_dir: Path, tmp_path: Path) -> None:
    missing = refused(
        run("issue", "qm1", "--dir", str(tmp_path / "nowhere"), "--host", "h"), "no CA"
    )
    assert "hint: make one with `qmgr certs init --dir DIR`" in missing.stderr
    refused(run("show", str(ca_dir / "ca.key")), "not a certificate")
    refused(run("show", str(tmp_path / "missing.crt")), "no such file")
    assert sorted(os.listdir(ca_dir)) == ["ca.crt", "ca.key"]
    usage = run("init", "--dir", str(ca_dir), "--days", "0")
    assert usage.exit_code == 2


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["qm1"], "Error: a queue manager certificate needs at least one --host: one for each"),
        (
            ["../qm1", "--host", "h"],
            "Error: Invalid value for 'NAME': the name '../qm1' is not usable as a file name",
        ),
        (
            ["ca", "--client"],
            "Error: Invalid value for 'NAME': the name 'ca' is the CA's own (ca.key, ca.crt)",
        ),
        (
            [".bad", "--client"],
            "Error: Invalid value for 'NAME': the name '.bad' is not usable as a file name",
        ),
        (
            ["qm1", "--host", "a b"],
            "Error: Invalid value for '--host': the host 'a b' is neither an IP address",
        ),
        (["bob", "--client", "--host", "h"], "Error: a client certificate names a principal"),
    ],
    ids=["no host", "path", "the CA's name", "dot first", "bad host", "client with hosts"],
)
def test_bad_arguments_are_usage_errors(ca_dir: Path, args: list[str], error: str) -> None:
    """What is wrong with the arguments themselves exits with status 2, as every
    usage error does, before the CA is read; nothing is written."""
    result = run("issue", *args, "--dir", str(ca_dir))
    assert result.exit_code == 2, result.output
    assert error in result.stderr
    assert sorted(os.listdir(ca_dir)) == ["ca.crt", "ca.key"]
    # The same with no CA at all: the arguments are refused first.
    result = run("issue", *args, "--dir", str(ca_dir / "nowhere"))
    assert result.exit_code == 2, result.output


def test_a_bad_ca_name_is_a_usage_error(tmp_path: Path) -> None:
    result = run("init", "--dir", str(tmp_path / "ca"), "--name", " ")
    assert result.exit_code == 2, result.output
    assert "Error: Invalid value for '--name': the CA name is empty" in result.stderr
    assert not (tmp_path / "ca").exists()


@pytest.mark.parametrize("name", ["everyone", "group:ops", "peer:qm2"])
def test_no_client_certificate_for_a_name_the_queue_manager_refuses(
    ca_dir: Path, name: str
) -> None:
    result = run("issue", name, "--client", "--dir", str(ca_dir))
    assert result.exit_code == 2, result.output  # a usage error
    problem = user_name_problem(name)
    assert problem is not None
    assert f"Error: Invalid value for 'NAME': {problem}" in result.stderr
    assert sorted(os.listdir(ca_dir)) == ["ca.crt", "ca.key"]
