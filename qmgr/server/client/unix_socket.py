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
import struct
from typing import Final

import trio

__all__ = ["LocalUser", "local_user"]

_PEERCRED: Final = struct.Struct("3i")  # pid, uid, gid


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
    """Who is connected on ``sock`` (``SO_PEERCRED``), a Unix-domain socket (on
    another kind Linux answers with zeros, which would read as root).

    Raises:
        OSError: the kernel does not say.
    """
    pid, uid, gid = _PEERCRED.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    )
    return LocalUser(pid, uid, gid)
