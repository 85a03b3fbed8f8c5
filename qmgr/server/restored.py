"""Preparing a data directory restored from a backup, before the queue manager starts.

A copy of a store is the same queue manager, behind what its peers know of
it (``storage.ops.restore`` says how, and what it changes). This runs on the
stopped queue manager's data directory, as ``qmgr restored`` asks: the
store's lock refuses it while a daemon holds the directory, and one write
transaction does all of it, or nothing.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import storage
from qmgr.config import Config

from .listeners import StartupError

__all__ = ["Restored", "renew_after_restore"]


@dataclass(frozen=True, slots=True)
class Restored:
    """What preparing a restored data directory did, and what it leaves to the operator."""

    renewed: storage.Renewed
    #: Transactions prepared (two-phase) in the backup, by xid: in doubt here,
    #: and perhaps resolved by the original after the backup.
    in_doubt: tuple[str, ...]


def renew_after_restore(config: Config, *, now: float) -> Restored:
    """Write ``storage.RenewAfterRestore`` into the store of ``config.data_dir``.

    Raises:
        StartupError: there is no store there, a queue manager runs on it, or
            it cannot be opened or written (the message says which; nothing
            was changed).
    """
    directory = config.data_dir
    if not (directory / "data.mdb").is_file():
        msg = f"no store in {directory}: restore the backup into the data directory first"
        raise StartupError(msg)
    try:
        store = storage.Store(
            directory,
            initial_map_size=config.initial_map_size,
            max_map_size=config.max_map_size,
            reserve_size=config.reserve_size,
        )
    except storage.StoreLocked as exc:
        msg = f"a queue manager is running on {directory}: stop it first ({exc})"
        raise StartupError(msg) from exc
    except Exception as exc:
        msg = f"cannot open the store in {directory}: {exc}"
        raise StartupError(msg) from exc
    with store:
        try:
            in_doubt = tuple(info.xid for info in store.prepared_transactions())
            [outcome] = store.commit(
                [storage.Unit((storage.RenewAfterRestore(now, secrets.randbits(64)),))], now=now
            )
        except storage.StoreError as exc:
            msg = f"the store in {directory} was not changed: {exc}"
            raise StartupError(msg) from exc
    if outcome.error is not None:
        msg = f"the store in {directory} was not changed: {outcome.error}"
        raise StartupError(msg)
    [result] = outcome.results
    assert isinstance(result, storage.Renewed)
    return Restored(result, in_doubt)
