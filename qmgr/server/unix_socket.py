"""The Unix-domain socket for local clients, who are known by their user.

Theory of operation
-------------------
With ``server.unix_socket`` set, the daemon also serves clients on that
path. Who connects is not a matter of proof: the kernel tells
(``SO_PEERCRED``), so a local client is authenticated as its user's name
(uid 0 is ``root``), in the groups ``group:<name>`` of its Unix groups as
well as the configured ones. Queue permissions then apply as to any
principal. The socket file is made mode 0666: anyone on the host may
connect, and what they may do is what their user may do.

At start an existing socket file is replaced only if nothing answers on it
(a stale file of a daemon that did not stop cleanly); a daemon that answers
there is an error. The file is removed when the daemon stops.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import socket
import stat
import struct
from pathlib import Path
from typing import Final

import trio

__all__ = ["LocalUser", "local_user", "open_unix_listener", "remove_socket"]

_PEERCRED: Final = struct.Struct("3i")  # pid, uid, gid
_BACKLOG: Final = 128


class LocalUser:
    """The user at the other end of a Unix-domain connection."""

    __slots__ = ("groups", "name", "pid", "uid")

    def __init__(self, pid: int, uid: int, gid: int) -> None:
        self.pid = pid
        self.uid = uid
        try:
            self.name = pwd.getpwuid(uid).pw_name
        except KeyError:
            self.name = f"uid:{uid}"
        names = set()
        with contextlib.suppress(KeyError, OSError):
            for group_id in os.getgrouplist(self.name, gid):
                with contextlib.suppress(KeyError):
                    names.add(f"group:{grp.getgrgid(group_id).gr_name}")
        self.groups = frozenset(names)


def local_user(sock: socket.socket | trio.socket.SocketType) -> LocalUser:
    """Who is connected on ``sock`` (``SO_PEERCRED``).

    Raises:
        OSError: the kernel does not say (not a Unix-domain socket).
    """
    pid, uid, gid = _PEERCRED.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    )
    return LocalUser(pid, uid, gid)


async def open_unix_listener(path: Path) -> trio.SocketListener:
    """Listen on ``path`` (mode 0666), replacing a stale socket file.

    Raises:
        OSError: the path is taken (by a live daemon, or by something that is
            not a socket), or cannot be bound.
    """
    _clear_stale(path)  # at start-up, before anything is served: a blocking call is fine
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        await sock.bind(str(path))
        os.chmod(path, 0o666)
        sock.listen(_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return trio.SocketListener(sock)


def _clear_stale(path: Path) -> None:
    """Remove a socket file nothing answers on; make the directory if needed.

    Raises:
        FileExistsError: something answers there, or it is not a socket.
    """
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            msg = f"{path} exists and is not a socket"
            raise FileExistsError(msg)
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # nothing answers: a stale file
        else:
            msg = f"another process listens on {path}"
            raise FileExistsError(msg)
        finally:
            probe.close()
    path.parent.mkdir(parents=True, exist_ok=True)


def remove_socket(path: Path) -> None:
    """Remove the socket file (at shutdown); nothing if it is gone."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
