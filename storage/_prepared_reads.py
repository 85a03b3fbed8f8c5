"""Reading prepared transactions and kept outcomes.

Like every read of the store, each function opens a read transaction,
copies what it found and closes it before it returns. Prepared transactions
are listed from their headers only: the cursor jumps from one header over
the transaction's sends to the next, so a listing costs O(transactions
listed), whatever they send. Both listings are in xid order (by UTF-8
bytes) and start at a prefix with a seek.
"""

from __future__ import annotations

from ._catalog import Catalog
from ._env import Environment
from ._errors import InvalidRecord, StoreCorrupt
from ._keys import prepared_key, split_prepared_key, xid_key
from ._prepared import OutcomeInfo, PreparedInfo, decode_header, decode_outcome

__all__ = ["read_outcome", "read_outcomes", "read_prepared", "read_prepared_one"]


def _prefix(prefix: str) -> bytes | None:
    """The key prefix of xids starting with ``prefix``, or None if no xid can."""
    try:
        encoded = prefix.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return None if b"\x00" in encoded else encoded


def _xid(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"transaction id {raw!r} is not UTF-8"
        raise StoreCorrupt(msg) from exc


def _known_xid(xid: str) -> bytes | None:
    try:
        return xid_key(xid)
    except InvalidRecord:
        return None


def read_prepared(
    env: Environment, catalog: Catalog, prefix: str, limit: int | None, owner: str | None = None
) -> list[PreparedInfo]:
    """Prepared transactions whose xid starts with ``prefix``, in xid order; at
    most ``limit`` (``None``: all); only those of ``owner`` unless it is None.

    Raises:
        StoreCorrupt: a key or header does not decode.
    """
    start = _prefix(prefix)
    if start is None or (limit is not None and limit <= 0):
        return []
    found: list[PreparedInfo] = []
    with env.read("prepared_transactions") as txn, txn.cursor(db=catalog.dbs.prepared) as cursor:
        positioned = cursor.set_range(start)
        while positioned:
            key = bytes(cursor.key())
            if not key.startswith(start):
                break
            try:
                raw, index = split_prepared_key(key)
            except Exception as exc:
                msg = f"prepared transaction key {key.hex()} is corrupt"
                raise StoreCorrupt(msg) from exc
            if index != 0:
                msg = f"prepared transaction {raw!r} has no header"
                raise StoreCorrupt(msg)
            info = decode_header(cursor.value()).info(_xid(raw))
            if owner is None or info.owner == owner:
                found.append(info)
            if limit is not None and len(found) >= limit:
                break
            positioned = cursor.set_range(raw + b"\x01")  # past its sends
    return found


def read_prepared_one(env: Environment, catalog: Catalog, xid: str) -> PreparedInfo | None:
    """The prepared transaction ``xid``, or ``None`` (also for a malformed xid).

    Raises:
        StoreCorrupt: its header does not decode.
    """
    raw = _known_xid(xid)
    if raw is None:
        return None
    with env.read("prepared") as txn:
        data = txn.get(prepared_key(raw, 0), db=catalog.dbs.prepared)
        return None if data is None else decode_header(data).info(xid)


def read_outcome(env: Environment, catalog: Catalog, xid: str) -> OutcomeInfo | None:
    """The kept outcome of ``xid``, or ``None`` (also for a malformed xid).

    Raises:
        StoreCorrupt: it does not decode.
    """
    raw = _known_xid(xid)
    if raw is None:
        return None
    with env.read("outcome") as txn:
        data = txn.get(raw, db=catalog.dbs.outcomes)
        return None if data is None else decode_outcome(xid, data)


def read_outcomes(
    env: Environment, catalog: Catalog, prefix: str, limit: int | None, owner: str | None = None
) -> list[OutcomeInfo]:
    """Kept outcomes whose xid starts with ``prefix``, in xid order; at most
    ``limit`` (``None``: all); only those of ``owner`` unless it is None.

    Raises:
        StoreCorrupt: one does not decode.
    """
    start = _prefix(prefix)
    if start is None or (limit is not None and limit <= 0):
        return []
    found: list[OutcomeInfo] = []
    with env.read("outcomes") as txn, txn.cursor(db=catalog.dbs.outcomes) as cursor:
        positioned = cursor.set_range(start)
        while positioned:
            raw = bytes(cursor.key())
            if not raw.startswith(start):
                break
            outcome = decode_outcome(_xid(raw), cursor.value())
            if owner is None or outcome.owner == owner:
                found.append(outcome)
            if limit is not None and len(found) >= limit:
                break
            positioned = cursor.next()
    return found
