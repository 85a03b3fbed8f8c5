"""Reading and writing the files of :mod:`qmgr.certs`.

Writes are atomic (a temporary file in the same directory, fsync, rename,
fsync of the directory), so a crash leaves the old file or the new one,
never half of one. A private file (a key) has mode 0600 from the moment it
is created; directories are created with mode 0700.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from qmgr.certs.errors import CertsError, ExistingFilesError

__all__ = ["make_private_directory", "read_file", "refuse_existing", "write_atomically"]


def read_file(path: Path) -> bytes:
    """The contents of ``path``.

    Raises:
        CertsError: the file is missing or unreadable.
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        msg = f"{path}: no such file"
        raise CertsError(msg) from None
    except OSError as exc:
        msg = f"{path}: {exc.strerror}"
        raise CertsError(msg) from None


def refuse_existing(paths: Sequence[Path], force: bool) -> None:
    """Refuse to go on if any of ``paths`` exists, unless ``force``.

    Raises:
        ExistingFilesError: naming the files that exist.
    """
    existing = [path for path in paths if path.exists()]
    if existing and not force:
        raise ExistingFilesError(existing)


def make_private_directory(directory: Path) -> None:
    """Create ``directory`` (and its parents) if missing, itself with mode 0700.

    Raises:
        CertsError: it cannot be created.
    """
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"cannot create {directory}: {exc.strerror}"
        raise CertsError(msg) from None


def write_atomically(path: Path, data: bytes, *, private: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    A ``private`` file is created with mode 0600, any other with 0644 (both
    less the umask).

    Raises:
        CertsError: it cannot be written (no temporary file is left behind).
    """
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o644)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
        directory_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)
    except OSError as exc:
        msg = f"cannot write {path}: {exc.strerror}"
        raise CertsError(msg) from None
