"""``qmgr certs``: a deployment CA and the TLS certificates of queue managers and clients.

``init`` makes the CA (``ca.key``, ``ca.crt``) in a directory, ``issue``
signs a certificate for a queue manager (``--host`` for each name or
address it is reached at) or, with ``--client``, for an SDK or CLI user,
and ``show`` prints what a certificate says, with whether it is valid now
(expired, not yet valid) and for how long. The work is done by
:mod:`qmgr.certs`; these commands need no running queue manager.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from qmgr.certs import (
    CaNotFoundError,
    CertInfo,
    CertsError,
    ExistingFilesError,
    describe,
    init_ca,
    issue,
)
from qmgr.certs.names import check_ca_name, check_leaf_name, host_names
from qmgr.client.shapes import iso
from qmgr.core.permissions import user_name_problem

from .common import CliError, plural, reports_errors

__all__ = ["certs"]

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DIR = Path("certs")
_KIND_NAMES = {
    "ca": "certificate authority",
    "qm": "queue manager (serverAuth, clientAuth)",
    "client": "client (clientAuth)",
    "other": "other (not made by qmgr certs)",
}

_directory = click.Path(file_okay=False, path_type=Path)


def _dir_option(help: str) -> Callable[[F], F]:
    """``--dir`` (the parameter ``directory``): the CA's directory, ``certs`` by default."""
    return click.option(
        "--dir", "directory", type=_directory, default=DEFAULT_DIR, show_default=True, help=help
    )


@contextmanager
def _reported() -> Iterator[None]:
    """Turn a :class:`CertsError` into a :class:`CliError`, with a hint where one helps."""
    try:
        yield
    except ExistingFilesError as exc:
        raise CliError(str(exc), hint="--force replaces them") from None
    except CaNotFoundError as exc:
        raise CliError(str(exc), hint="make one with `qmgr certs init --dir DIR`") from None
    except CertsError as exc:
        raise CliError(str(exc)) from None


@click.group()
def certs() -> None:
    """Make a deployment CA and the TLS certificates of queue managers and clients."""


@certs.command("init")
@_dir_option("Directory of the CA (created with mode 0700).")
@click.option("--name", default="qmgr deployment CA", show_default=True, help="The CA's name.")
@click.option(
    "--days", type=click.IntRange(min=1), default=3650, show_default=True, help="Validity."
)
@click.option(
    "--force", is_flag=True, help="Replace an existing CA (its certificates stop verifying)."
)
@reports_errors
def certs_init(directory: Path, name: str, days: int, force: bool) -> None:
    """Create the CA: ca.key and ca.crt.

    ca.key signs certificates: keep it secret, and off the queue managers'
    hosts. ca.crt is the trust root every queue manager and client is given.
    """
    try:
        check_ca_name(name)
    except CertsError as exc:
        raise click.BadParameter(str(exc), param_hint="'--name'") from None
    with _reported():
        paths = init_ca(directory, name=name, days=days, force=force)
    click.echo(f"wrote {paths.key} (the CA's private key, mode 0600: keep it secret)")
    click.echo(f"wrote {paths.cert} (the CA certificate: every queue manager and client trusts it)")
    dir_option = "" if directory == DEFAULT_DIR else f" --dir {shlex.quote(str(directory))}"
    click.echo(f"next: qmgr certs issue QM-NAME --host HOST{dir_option}")


@certs.command("issue")
@click.argument("name")
@_dir_option("Directory of the CA.")
@click.option(
    "--client",
    "is_client",
    is_flag=True,
    help="A client certificate (its name is the principal) instead of a queue manager's.",
)
@click.option(
    "--host",
    "hosts",
    multiple=True,
    metavar="HOST",
    help="A DNS name or IP address the queue manager is reached at (repeatable).",
)
@click.option(
    "--days", type=click.IntRange(min=1), default=825, show_default=True, help="Validity."
)
@click.option(
    "--out",
    "out_dir",
    type=_directory,
    default=None,
    help="Write the files here (with a copy of ca.crt) instead of in --dir.",
)
@click.option("--force", is_flag=True, help="Replace existing files (renewal).")
@reports_errors
def certs_issue(
    name: str,
    directory: Path,
    is_client: bool,
    hosts: tuple[str, ...],
    days: int,
    out_dir: Path | None,
    force: bool,
) -> None:
    """Issue a queue manager's certificate (or, with --client, a user's).

    NAME is the certificate's Common Name, the identity the other end sees,
    and the base name of its files, NAME.key and NAME.crt. A client's NAME
    is its principal: not everyone, and not beginning with group: or peer:
    (the queue manager refuses such a certificate in the handshake).
    """
    _check_issue_arguments(name, is_client=is_client, hosts=hosts)
    with _reported():
        paths = issue(
            directory,
            name,
            kind="client" if is_client else "qm",
            hosts=hosts,
            days=days,
            out_dir=out_dir,
            force=force,
        )
        info = describe(paths.cert)
    what = "client" if is_client else "queue manager"
    hosts_part = f" for {', '.join(info.dns_names + info.ip_addresses)}" if hosts else ""
    click.echo(
        f"issued the {what} certificate {name}{hosts_part}, valid until {info.not_after:%Y-%m-%d}"
    )
    click.echo(f"wrote {paths.key} (its private key, mode 0600: keep it secret)")
    click.echo(f"wrote {paths.cert}")
    if out_dir is not None:
        click.echo(f"with {paths.ca_cert} (the CA certificate, to verify the other end)")


def _check_issue_arguments(name: str, *, is_client: bool, hosts: tuple[str, ...]) -> None:
    """Refuse, as a usage error (exit status 2), what ``issue`` would refuse of
    its arguments: a NAME that cannot be a certificate's (or a client's), hosts
    for a client, none for a queue manager, a host that is no DNS name or IP
    address. What depends on the CA's directory is left to ``issue``.

    Raises:
        click.UsageError: saying which argument and why.
    """
    problem = user_name_problem(name) if is_client else None
    if problem is not None:
        raise click.BadParameter(problem, param_hint="'NAME'")
    try:
        check_leaf_name(name)
    except CertsError as exc:
        raise click.BadParameter(str(exc), param_hint="'NAME'") from None
    if is_client and hosts:
        msg = "a client certificate names a principal, not hosts: give --client or --host"
        raise click.UsageError(msg)
    if not is_client and not hosts:
        msg = (
            "a queue manager certificate needs at least one --host: one for each DNS name "
            "and IP address clients and peers connect to (--client for a user's certificate)"
        )
        raise click.UsageError(msg)
    try:
        host_names(hosts)
    except CertsError as exc:
        raise click.BadParameter(str(exc), param_hint="'--host'") from None


@certs.command("show")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@reports_errors
def certs_show(path: Path, as_json: bool) -> None:
    """Show a certificate's names, kind, validity and fingerprint."""
    now = dt.datetime.now(dt.UTC)
    with _reported():
        info = describe(path, now=now)
    if as_json:
        click.echo(json.dumps(_info_json(info)))
        return
    hosts = info.dns_names + info.ip_addresses
    rows = [
        ("subject", info.subject),
        ("issuer", info.issuer),
        ("kind", _KIND_NAMES[info.kind]),
        ("hosts", ", ".join(hosts) if hosts else "(none)"),
        ("valid from", iso(info.not_before)),
        ("valid until", iso(info.not_after)),
        ("status", _status(info, now)),
        ("serial", f"{info.serial:x}"),
        ("sha256", info.sha256_fingerprint),
    ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        click.echo(f"{label + ':':<{width + 1}} {value}")


def _status(info: CertInfo, now: dt.datetime) -> str:
    """``valid, expires in 824 days (...)``, ``expired 3 days ago (...)`` or
    ``not yet valid: valid in 2 hours (...)``."""
    if info.validity == "expired":
        return f"expired {_span(now - info.not_after)} ago ({_when(info.not_after)})"
    if info.validity == "not yet valid":
        return f"not yet valid: valid in {_span(info.not_before - now)} ({_when(info.not_before)})"
    return f"valid, expires in {_span(info.not_after - now)} ({_when(info.not_after)})"


def _span(delta: dt.timedelta) -> str:
    """A duration for people, in its largest whole unit: ``3 days``, ``1 hour``."""
    seconds = int(delta.total_seconds())
    for unit, length in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= length:
            return plural(seconds // length, unit)
    return "less than a minute"


def _when(moment: dt.datetime) -> str:
    return f"{moment.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"


def _info_json(info: CertInfo) -> dict[str, object]:
    return {
        "path": str(info.path),
        "subject": info.subject,
        "issuer": info.issuer,
        "kind": info.kind,
        "dns_names": list(info.dns_names),
        "ip_addresses": list(info.ip_addresses),
        "not_before": iso(info.not_before),
        "not_after": iso(info.not_after),
        "validity": info.validity,
        "serial": f"{info.serial:x}",
        "sha256_fingerprint": info.sha256_fingerprint,
    }
