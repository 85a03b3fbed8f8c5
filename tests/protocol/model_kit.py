"""What the protocol tests' models share: queue manager GUIDs, a start time, and the
steps hypothesis interleaves (a step is a name and its argument; a model applies
them one by one, then settles on a reliable network and checks what it promises)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Generic, Protocol, TypeAlias, TypeVar

from hypothesis import strategies as st

A_QM = uuid.UUID("a0000000-0000-4000-8000-00000000000a")
B_QM = uuid.UUID("b0000000-0000-4000-8000-00000000000b")
C_QM = uuid.UUID("c0000000-0000-4000-8000-00000000000c")
#: A ``now`` to start from (seconds, any monotonic origin).
T0 = 1_000.0

#: One step: its name and its argument (None for none).
Op: TypeAlias = tuple[str, object]

#: Which packet in flight a network step takes (modulo how many there are).
indices = st.integers(0, 63)
#: What a network step does to it (delivering it is the most common).
faults = st.sampled_from(["deliver", "deliver", "duplicate", "drop", "delay"])
#: A step on the packets held back for long: they come, once or twice.
late = st.tuples(indices, st.sampled_from(["deliver", "duplicate"]), st.just(True))

P = TypeVar("P")


class Network(Generic[P]):
    """One direction: packets in flight, and packets held back for a long time."""

    def __init__(self) -> None:
        self.flight: list[P] = []
        self.late: list[P] = []

    def take(self, index: int, action: str, *, late: bool = False) -> P | None:
        """Act on one packet (``deliver``, ``duplicate``, ``drop`` or ``delay``);
        return it if it is to be delivered now."""
        pool = self.late if late else self.flight
        if not pool:
            return None
        packet = pool[index % len(pool)]
        if action != "duplicate":
            pool.remove(packet)
        if action == "delay" and not late:
            self.late.append(packet)
        return None if action in ("drop", "delay") else packet


def step(name: str, arguments: st.SearchStrategy[object] | None = None) -> st.SearchStrategy[Op]:
    """The strategy of one step ``name`` with ``arguments`` (None: no argument)."""
    return st.tuples(st.just(name), st.none() if arguments is None else arguments)


class Model(Protocol):
    def apply(self, op: Op) -> None: ...

    def settle(self) -> None: ...

    def final_check(self) -> None: ...


M = TypeVar("M", bound=Model)


def settled(model: M) -> M:
    """Let ``model`` settle on a reliable network, then check what it promises."""
    model.settle()
    model.final_check()
    return model


def run_model(model: M, ops: Sequence[Op]) -> M:
    """Apply ``ops`` to ``model``, then let it settle and check it."""
    for op in ops:
        model.apply(op)
    return settled(model)
