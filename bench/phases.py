"""Where one commit's time goes inside the daemon.

Run: ``.venv/bin/python bench/phases.py [--commits 2000] [--no-sync]``

Runs the real daemon in this process, drives it from a separate client
process (one message per transaction, as in ``bench/local.py``), and stamps
five moments of every commit cycle: bytes received, unit submitted, batch
written, reply sent, next request received. It prints the median of each
phase. ``--no-sync`` opens the store with ``durable=False`` to show the
Python cost alone. The stamps are taken by wrapping a few internals, so the
absolute figures are a little higher than without them.
"""

from __future__ import annotations

import argparse
import bisect
import logging
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import structlog
import trio

import storage.store as store_module
from qmgr import socket_stream as connection_module
from qmgr.config import load_config
from qmgr.server import committer as committer_module
from qmgr.server import daemon as daemon_module
from qmgr.server.client import session as session_module

CLIENT = textwrap.dedent(
    """
    import sys
    from qmgr.client import connect
    with connect(sys.argv[1]) as qm:
        qm.create_queue("phases", transactional=True)
        for _ in range(int(sys.argv[2])):
            with qm.begin() as tx:
                tx.send("phases", b"x" * 256)
    """
)

Stamps = dict[str, list[float]]


def instrument(stamps: Stamps, durable: bool) -> None:
    """Wrap the daemon's internals so that each phase boundary is stamped."""

    def stamp(name: str) -> None:
        stamps.setdefault(name, []).append(time.perf_counter())

    receive = connection_module.RawConnection.receive_some

    async def receive_some(self: Any, max_bytes: int | None = None) -> bytes:
        data = await receive(self, max_bytes)
        stamp("received")
        return data

    submit = committer_module.Committer.submit

    async def submitted(self: Any, unit: Any, *, source: int = 0) -> Any:
        stamp("submitted")
        return await submit(self, unit, source=source)

    apply = store_module.Store.apply

    def written(self: Any, plan: Any) -> None:
        stamp("batch_started")
        apply(self, plan)
        stamp("batch_written")

    flush = session_module.ClientSession._flush

    async def flushed(self: Any) -> None:
        had_replies = bool(self._outbox)
        await flush(self)
        if had_replies:
            stamp("reply_sent")

    open_store = store_module.Store.__init__

    def store_init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["durable"] = durable
        open_store(self, *args, **kwargs)

    patches: list[tuple[Any, str, Callable[..., Any]]] = [
        (connection_module.RawConnection, "receive_some", receive_some),
        (committer_module.Committer, "submit", submitted),
        (store_module.Store, "apply", written),
        (session_module.ClientSession, "_flush", flushed),
        (store_module.Store, "__init__", store_init),
    ]
    for owner, name, replacement in patches:
        setattr(owner, name, replacement)


def phases(stamps: Stamps) -> list[tuple[str, float]]:
    received, submitted = stamps["received"], stamps["submitted"]
    started, written, sent = stamps["batch_started"], stamps["batch_written"], stamps["reply_sent"]
    rows = []
    for index in range(len(started) // 10, len(started) - 1):
        begin = started[index]
        read = received[bisect.bisect_left(received, begin) - 1]
        handed = submitted[bisect.bisect_left(submitted, begin) - 1]
        replied = sent[bisect.bisect_left(sent, written[index])]
        following = received[bisect.bisect_left(received, replied)]
        rows.append(
            (
                handed - read,
                begin - handed,
                written[index] - begin,
                replied - written[index],
                following - replied,
                following - read,
            )
        )
    names = [
        "request received -> unit submitted",
        "unit submitted -> apply started",
        "apply (write transaction and sync)",
        "applied -> reply sent",
        "reply sent -> next request (client)",
        "whole cycle",
    ]
    return [(name, statistics.median(row[i] for row in rows)) for i, name in enumerate(names)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--no-sync", action="store_true", help="open the store with durable=False")
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    stamps: Stamps = {}
    instrument(stamps, durable=not args.no_sync)
    args.data_dir.mkdir(parents=True, exist_ok=True)

    async def run() -> float:
        config = load_config(
            None,
            data_dir=tempfile.mkdtemp(dir=args.data_dir),
            client_listen="127.0.0.1:0",
            listen="127.0.0.1:0",
            http_listen="",
            log_level="warning",
            log_format="json",
        )
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(daemon_module.serve, config)
            started = time.perf_counter()
            await trio.run_process(
                [sys.executable, "-P", "-c", CLIENT, f"{host}:{port}", str(args.commits)]
            )
            elapsed = time.perf_counter() - started
            nursery.cancel_scope.cancel()
        return elapsed

    elapsed = trio.run(run)
    sync = "off" if args.no_sync else "on"
    print(f"{args.commits / elapsed:,.0f} commits/s, sync {sync}; median per commit:")
    for name, seconds in phases(stamps):
        print(f"  {name:<38} {seconds * 1e6:7.0f} µs")


if __name__ == "__main__":
    main()
