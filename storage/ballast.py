"""The ballast: space kept on the file system so that removals work on a full disk.

Theory of operation
-------------------
LMDB extends ``data.mdb`` as it needs pages, and on a full file system it
cannot: a receive or a purge, which needs a few new pages before it frees
any, would fail like a send. The store therefore keeps a *ballast* file
(``reserve``, up to ``reserve_size`` bytes, allocated with
``posix_fallocate``) next to its data. When a write that only removes data
finds no room, :meth:`Ballast.release` deletes the file and the write is
tried again in the space it leaves.

:meth:`Ballast.restore` puts it back as soon as the file system has any
room, as large as the room allows (less :data:`BALLAST_MARGIN`, left free),
and grows it back to ``reserve_size`` as more room appears. It must not
wait for the whole ``reserve_size``: ``data.mdb`` never shrinks (LMDB keeps
freed pages in the file), so after the first full disk the room never
comes back by itself, and new messages would take what the released
ballast left, until the next full disk found no ballast to give up.

A file system may keep back part of what it reports free (ext4 keeps some
blocks even from root): when a size does not fit, the file is put back as
it was and half the growth is tried, down to :data:`_BALLAST_STEP`; until
the ballast or the room changes, it is not tried again.

Nothing here is LMDB's: the environment owns a :class:`Ballast` and calls
it between write transactions, on the owner's thread.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
from typing import Final

__all__ = ["BALLAST_FILE", "BALLAST_MARGIN", "Ballast", "disk_room"]

#: The ballast file's name in the store's directory.
BALLAST_FILE: Final = "reserve"

#: Free bytes :meth:`Ballast.restore` leaves on the file system when it has
#: less room than the whole ballast. Small: new messages take this room, so
#: the ballast put back after a full disk is smaller by it (and by what the
#: removals used) each time the disk fills up again.
BALLAST_MARGIN: Final = 256 * 1024

#: The smallest step by which :meth:`Ballast.restore` tries a smaller
#: ballast when the one it tried did not fit.
_BALLAST_STEP: Final = 64 * 1024


def disk_room(path: pathlib.Path) -> int:
    """Free bytes on the file system of ``path`` that this process may fill:
    with the blocks kept for the superuser when it runs as root (the store's
    writes may then take them too)."""
    stats = os.statvfs(path)
    blocks = stats.f_bfree if os.geteuid() == 0 else stats.f_bavail
    return blocks * stats.f_frsize


class Ballast:
    """The ballast file of the store in ``directory``: ``reserve_size`` bytes
    (0: none), allocated in whole pages of ``page_size``."""

    def __init__(self, directory: pathlib.Path, reserve_size: int, page_size: int) -> None:
        self._directory = directory
        self._path = directory / BALLAST_FILE
        self._reserve_size = reserve_size
        self._page_size = page_size
        # The ballast's size and the disk's room when it last could not grow.
        self._stuck = (-1, -1)

    @property
    def whole(self) -> bool:
        """True while the file holds all of ``reserve_size`` (or none is configured)."""
        return not self._reserve_size or self.size() >= self._reserve_size

    def size(self) -> int:
        """Bytes the file holds now."""
        try:
            return self._path.stat().st_blocks * 512
        except OSError:
            return 0

    def release(self) -> bool:
        """Delete the file to give its space to the store; True if it held any."""
        if not self._reserve_size or self.size() == 0:
            return False
        with contextlib.suppress(OSError):
            self._path.unlink()
        return True

    def restore(self) -> bool:
        """Allocate the file, or grow it, as far as the disk has room; True if it
        holds all of ``reserve_size`` afterwards (see the module docstring)."""
        if self.whole:
            return True
        held = self.size()
        try:
            room = disk_room(self._directory)
        except OSError:
            return False
        if (held, room) == self._stuck:
            return False
        wanted = min(self._reserve_size, self._whole_pages(held + room - BALLAST_MARGIN))
        while wanted > held:
            if self._allocate(wanted):
                return wanted >= self._reserve_size
            if wanted - held <= _BALLAST_STEP:
                break
            wanted = held + max(self._whole_pages((wanted - held) // 2), _BALLAST_STEP)
        with contextlib.suppress(OSError):
            self._stuck = (self.size(), disk_room(self._directory))
        return False

    def _whole_pages(self, size: int) -> int:
        """``size`` rounded down to a whole number of pages (0 if negative)."""
        return max(size, 0) // self._page_size * self._page_size

    def _allocate(self, size: int) -> bool:
        """Make the file ``size`` bytes; if that fails, leave it as it was."""
        try:
            length = self._path.stat().st_size
        except OSError:
            length = 0
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return False
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError:
            with contextlib.suppress(OSError):
                if length:
                    os.ftruncate(fd, length)
                else:
                    self._path.unlink()
            return False
        finally:
            os.close(fd)
        return True
