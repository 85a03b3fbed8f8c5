"""Values as people read them: byte counts, durations and counted nouns, one
definition for the CLI's tables and the web console's pages (standard
library only: ``qmgr serve`` loads it with the CLI)."""

from __future__ import annotations

__all__ = ["age", "plural", "size"]


def size(value: int) -> str:
    """A byte count for people: ``512 B``, ``1.5 KiB``, ``10.0 MiB``."""
    if value < 1024:
        return f"{value} B"
    scaled = float(value)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        scaled /= 1024
        if scaled < 1024 or unit == "TiB":
            break
    return f"{scaled:.1f} {unit}"


def age(seconds: float) -> str:
    """A duration for people: ``42s``, ``3m12s``, ``2h05m``, ``3d04h``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def plural(count: int, noun: str) -> str:
    """``1 message``, ``2 messages``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
