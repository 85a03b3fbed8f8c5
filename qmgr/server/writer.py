"""The writer: applies the store's planned batches, on a thread of its own or inline.

Theory of operation
-------------------
One writer applies every write to LMDB: ``Store.apply`` of one plan, which
is one write transaction and its sync. With ``thread=True`` it runs on a
dedicated thread, so that the event loop goes on decoding, validating and
answering the next requests while the disk syncs (py-lmdb releases the GIL
inside the commit); the result comes back with ``run_sync_soon``. Inline,
it runs on the event loop's own thread and blocks it for the sync: no
thread hop, which is cheaper when there is nothing to overlap.

A plan is handed to the thread whole and applied there whole: no write
transaction ever spans an ``await``, and only one is in flight at a time
(the committer awaits each before planning the next). The wait for the
thread is shielded from cancellation: once a write has started, its result
must be known, whatever happens to the task that asked for it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

import trio

import storage
from storage import Plan, Store

__all__ = ["Writer"]

_Job = tuple[Plan, trio.lowlevel.TrioToken, Callable[[storage.StoreError | None], None]]


class Writer:
    """Applies plans one at a time; see the module docstring.

    Args:
        store: the store whose plans it applies.
        thread: apply on a dedicated thread (else on the caller's).
    """

    def __init__(self, store: Store, *, thread: bool) -> None:
        self._store = store
        self.threaded = thread
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        if thread:
            self._thread = threading.Thread(target=self._run, name="qmgr-writer", daemon=True)
            self._thread.start()

    async def apply(self, plan: Plan) -> storage.StoreError | None:
        """Apply ``plan``; returns None, or the error to send back into the store's driver."""
        if self._thread is None:
            return self._apply_here(plan)
        event = trio.Event()
        box: list[storage.StoreError | None] = []

        def done(result: storage.StoreError | None) -> None:
            box.append(result)
            event.set()

        self._jobs.put((plan, trio.lowlevel.current_trio_token(), done))
        with trio.CancelScope(shield=True):
            await event.wait()
        return box[0]

    def _apply_here(self, plan: Plan) -> storage.StoreError | None:
        try:
            self._store.apply(plan)
        except storage.StoreError as exc:
            return exc
        except Exception as exc:
            # Nothing else is expected; whatever it is, the batch failed whole.
            return storage.StoreError(f"the writer failed: {type(exc).__name__}: {exc}")
        return None

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            plan, token, done = job
            result = self._apply_here(plan)
            try:
                token.run_sync_soon(done, result)
            except trio.RunFinishedError:  # pragma: no cover - the loop ended first
                return

    def close(self) -> None:
        """Stop the thread once it has applied what it was given. Idempotent."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None
