"""``qmgr tx``: global transactions that are prepared and in doubt, and their outcomes.

A prepared transaction waits for its coordinator to commit or abort it by
its xid. When the coordinator is gone for good, an operator lists the ones
in doubt (``qmgr tx list``) and resolves them by hand (``qmgr tx commit
XID``, ``qmgr tx abort XID``). Resolving again is harmless while the daemon
keeps the outcome: the command says what had been done.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import click
from rich.table import Table
from rich.text import Text

from qmgr.client import Resolution, TransactionInfo, TransactionNotFound
from qmgr.client.shapes import transaction_json
from wire.client import xid_error

from .common import (
    CliError,
    age,
    client,
    folded,
    json_option,
    listing_table,
    print_listing,
    quoted,
    reports_errors,
    right,
    size,
)

__all__ = ["age", "transaction_json", "transactions_table", "tx"]

_LIST_HINT: Final = "`qmgr tx list --all` shows the prepared transactions and the outcomes kept"
_DONE: Final = {
    Resolution.COMMITTED: "committed {xid}",
    Resolution.ALREADY_COMMITTED: "{xid} was already committed",
    Resolution.ABORTED: "aborted {xid}",
    Resolution.ALREADY_ABORTED: "{xid} was already aborted",
}


@click.group()
def tx() -> None:
    """List, commit and abort prepared (in-doubt) global transactions.

    XID is the transaction's global id as `qmgr tx list` shows it.
    """


@tx.command("list")
@click.option("--all", "show_all", is_flag=True, help="Also list the outcomes kept.")
@click.option("--prefix", default="", metavar="P", help="Only xids that start with P.")
@json_option("Print a JSON array.")
@click.pass_context
@reports_errors
def tx_list(ctx: click.Context, show_all: bool, prefix: str, as_json: bool) -> None:
    """List the prepared (in-doubt) transactions, by xid.

    They wait to be committed or aborted. With --all, also the committed and
    aborted ones whose outcome the queue manager still keeps
    (transactions.outcome_retention).
    """
    with client(ctx) as qm:
        listed = qm.transactions(prefix, resolved=show_all)
    empty = "no transactions" if show_all else "no transactions in doubt"
    print_listing(listed, as_json, transaction_json, transactions_table, empty=empty)


def _xid(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Refuse, as a usage error, text that cannot name a transaction."""
    error = xid_error(value)
    if error is not None:
        raise click.BadParameter(error, ctx=ctx, param=param)
    return value


@tx.command("commit")
@click.argument("xid", callback=_xid)
@click.pass_context
@reports_errors
def tx_commit(ctx: click.Context, xid: str) -> None:
    """Commit the prepared transaction XID.

    Its sends become visible and its receives final. Committing one that was
    committed already says so; one that was aborted cannot be committed.
    """
    _resolve(ctx, xid, commit=True)


@tx.command("abort")
@click.argument("xid", callback=_xid)
@click.pass_context
@reports_errors
def tx_abort(ctx: click.Context, xid: str) -> None:
    """Abort the prepared transaction XID.

    Its sends are discarded and the messages it received go back to their
    queues. Aborting one that was aborted already says so; one that was
    committed cannot be aborted.
    """
    _resolve(ctx, xid, commit=False)


def _resolve(ctx: click.Context, xid: str, *, commit: bool) -> None:
    with client(ctx) as qm:
        try:
            done = qm.commit_prepared(xid) if commit else qm.abort_prepared(xid)
        except TransactionNotFound as exc:
            raise CliError(exc.message, hint=_LIST_HINT) from None
    click.echo(_DONE[done].format(xid=quoted(xid)))


# --------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------


def transactions_table(listed: Sequence[TransactionInfo]) -> Table:
    """Transactions for people: the age is since prepared (or resolved)."""
    table = listing_table(
        folded("xid"), "state", right("age"), right("sends"), right("receives"), right("bytes")
    )
    for t in listed:
        # Text, not a str: an xid is any client's text, never console markup. One
        # that white space ends or begins, or with a character that does not print,
        # is shown quoted (with escapes), so that look-alikes can be told apart.
        plain = t.xid.isprintable() and t.xid == t.xid.strip()
        xid = Text(t.xid if plain else quoted(t.xid))
        table.add_row(xid, str(t.state), age(t.age), str(t.sends), str(t.receives), size(t.bytes))
    return table
