"""The scaffolding of the crash tests: client threads that reconnect across
crashes, and a daemon SIGKILLed at random moments while they work.

A crash test starts its client threads and lets :func:`kill_while_working`
kill and restart the daemon (:class:`Crashes` says how often and when), then
checks what the clients recorded against what the store kept.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from helpers import DaemonProcess, wait_until

if TYPE_CHECKING:
    from qmgr.client import QueueManager


def reconnecting(address: str, stop: threading.Event) -> Iterator[QueueManager]:
    """Connections to ``address``, one after the other, until ``stop`` is set (a
    client's loop across crashes: a connect that fails is tried again)."""
    from qmgr.client import ConnectionLost, connect

    while not stop.is_set():
        try:
            qm = connect(address, timeout=2.0)
        except (ConnectionLost, OSError):
            time.sleep(0.02)  # the daemon is restarting: try again
            continue
        with qm:
            yield qm


def work_in_rounds(
    address: str, stop: threading.Event, one_round: Callable[[QueueManager, int], bool]
) -> None:
    """A client thread's loop across crashes: ``one_round(qm, number)`` with the
    numbers 1, 2, ... until ``stop`` is set, on a connection to ``address`` that
    is replaced (see :func:`reconnecting`) after a round returns False (it lost
    its connection)."""
    number = 0
    for qm in reconnecting(address, stop):
        while not stop.is_set():
            number += 1
            if not one_round(qm, number):
                break


@dataclass(frozen=True, kw_only=True)
class Crashes:
    """How a crash test kills its daemon while its clients work (see
    :func:`kill_while_working`)."""

    #: Client threads.
    workers: int
    #: SIGKILLs while they work.
    kills: int
    #: The progress (as the test counts it) to wait for between two kills.
    progress: int
    #: The longest random pause, in seconds, between that progress and the kill.
    pause: float = 0.1
    #: Seconds that progress may take.
    timeout: float = 60.0


def short_and_soak(short: Crashes, soak: Crashes, seed: int) -> pytest.MarkDecorator:
    """Parametrize a crash test with ``(run, seed)``: ``short`` (a slow test) seeded
    ``seed``, and ``soak`` (run with ``-m soak``) seeded ``seed + 1``."""
    return pytest.mark.parametrize(
        ("run", "seed"),
        [
            pytest.param(short, seed, marks=pytest.mark.slow, id="short"),
            pytest.param(soak, seed + 1, marks=pytest.mark.soak, id="soak"),
        ],
    )


def kill_while_working(
    daemon: DaemonProcess,
    threads: Sequence[threading.Thread],
    stop: threading.Event,
    progress: Callable[[], int],
    crashes: Crashes,
    rng: random.Random,
    finish: Callable[[], None],
) -> None:
    """The scaffolding of a crash test: start the client ``threads``;
    ``crashes.kills`` times, wait until ``progress()`` grew by ``crashes.progress``,
    then SIGKILL the daemon at a random moment and start it again; call
    ``finish()`` while the clients still run (to wait for the end of their
    work); then ``stop`` them, join them, and crash and restart the daemon once
    more with nothing in flight."""
    for thread in threads:
        thread.start()
    try:
        for _ in range(crashes.kills):
            before = progress()
            wait_until(
                lambda b=before: progress() >= b + crashes.progress,  # type: ignore[misc]
                crashes.timeout,
            )
            time.sleep(rng.uniform(0.0, crashes.pause))  # a random moment, not a wait for anything
            daemon.kill()
            daemon.start()
        finish()
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    daemon.kill()
    daemon.start()
