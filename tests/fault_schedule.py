"""Random faults on a :class:`~fault_proxy.FaultProxy` at random moments, in a background thread.

:class:`FaultSchedule` draws the kind and moment of each fault from its own
``random.Random(seed)``; the proxy's own choices come from the proxy's seed.
Thread scheduling still decides which bytes are in flight when a fault lands,
so a run is reproducible in its decisions, not byte for byte.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time

from fault_proxy import CutReport, FaultProxy

__all__ = ["FaultSchedule"]


@dataclasses.dataclass(slots=True)
class FaultSchedule:
    """Random faults on a :class:`FaultProxy` at random moments, in a background thread.

    Every ``pause`` (a uniform range, seconds) it draws one fault: a cut
    mid-frame, a clean cut (FIN or RST), a stall, a delay for a while, or a
    refusal of new connections together with a cut. ``log`` records each
    fault with its time, for the failure message.

    Args:
        proxy: the proxy to hurt.
        seed: seeds the choice and moment of every fault.
        pause: the range of seconds between two faults.
        stall: the range of a stall's length.
    """

    proxy: FaultProxy
    seed: int
    pause: tuple[float, float] = (0.15, 0.8)
    stall: tuple[float, float] = (0.2, 1.5)
    log: list[str] = dataclasses.field(default_factory=list)
    reports: list[CutReport] = dataclasses.field(default_factory=list)
    _stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def start(self) -> FaultSchedule:
        """Start hurting the proxy."""
        self._thread = threading.Thread(target=self._run, name="fault-schedule")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop, heal the proxy, and re-raise any error of the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30.0)
        self.proxy.heal()
        if self._error is not None:
            raise AssertionError(f"the fault schedule failed: {self._error!r}") from self._error

    def __enter__(self) -> FaultSchedule:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def cuts_of_live_connections(self) -> int:
        """Cuts that closed at least one connection."""
        return sum(1 for report in self.reports if report.connections)

    @property
    def mid_frame_cuts(self) -> int:
        """Cuts that left a chunk half forwarded."""
        return sum(1 for report in self.reports if report.partial)

    def _run(self) -> None:
        rng = random.Random(self.seed)
        started = time.monotonic()
        proxy = self.proxy
        try:
            while not self._stop.wait(rng.uniform(*self.pause)):
                at = f"{time.monotonic() - started:7.3f}s"
                kind = rng.choices(
                    ["mid-frame", "cut", "stall", "delay", "refuse"], weights=[4, 2, 2, 1, 1]
                )[0]
                if kind == "mid-frame":
                    report = proxy.cut(mid_frame=True, reset=rng.random() < 0.3, wait=0.5)
                    self.reports.append(report)
                    self.log.append(f"{at} cut mid-frame {report}")
                elif kind == "cut":
                    report = proxy.cut(reset=rng.random() < 0.5)
                    self.reports.append(report)
                    self.log.append(f"{at} cut {report}")
                elif kind == "stall":
                    seconds = rng.uniform(*self.stall)
                    proxy.stall(seconds)
                    self.log.append(f"{at} stall {seconds:.2f}s")
                elif kind == "delay":
                    seconds = rng.uniform(0.005, 0.05)
                    length = rng.uniform(0.3, 1.5)
                    proxy.set_delay(seconds)
                    self.log.append(f"{at} delay {seconds * 1000:.0f}ms for {length:.2f}s")
                    if self._stop.wait(length):
                        break
                    proxy.set_delay(0.0)
                else:
                    seconds = rng.uniform(0.2, 1.5)
                    proxy.refuse(seconds)
                    report = proxy.cut(reset=True)
                    self.reports.append(report)
                    self.log.append(f"{at} refuse {seconds:.2f}s and cut {report}")
        except BaseException as exc:
            self._error = exc
