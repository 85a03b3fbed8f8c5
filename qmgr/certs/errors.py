"""The errors of :mod:`qmgr.certs`: one base class, and the two cases a caller may act on."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["CaNotFoundError", "CertsError", "ExistingFilesError"]


class CertsError(Exception):
    """A certificate could not be made or read; the message says why."""


class CaNotFoundError(CertsError):
    """The directory holds no CA (``ca.key`` and ``ca.crt``)."""


class ExistingFilesError(CertsError):
    """The files to write exist already and ``force`` was not given."""

    def __init__(self, paths: Sequence[Path]) -> None:
        verb = "exists" if len(paths) == 1 else "exist"
        super().__init__(f"{' and '.join(map(str, paths))} {verb} already, not replaced")
        self.paths = tuple(paths)
