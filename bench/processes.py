"""A process and its descendants, read from `/proc`: what the stack's meters add up.

A stack's processes are its own, the fork servers of its environments and of moto (its children),
and the environments and motos they forked (grandchildren): a meter that counted children only would
leave them out.
"""

from __future__ import annotations

import os
from pathlib import Path


def stat_fields(pid: int) -> list[str]:
    """The fields of `/proc/<pid>/stat` after the command's name, which may itself hold spaces and
    parentheses: `[0]` is the state, `[1]` the parent, `[11]` and `[12]` the CPU ticks."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()


def children_by_parent() -> dict[int, list[int]]:
    """Every process of the machine, under its parent."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                children.setdefault(int(stat_fields(int(entry))[1]), []).append(int(entry))
            except (OSError, IndexError, ValueError):
                continue  # ended meanwhile
    return children


def family(pid: int) -> list[int]:
    """`pid` and its descendants, `pid` first."""
    children = children_by_parent()
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending += children.get(current, [])
    return found


def command(pid: int) -> str:
    """The process's command line, its words joined by spaces (a forked environment's is one
    string already, set by its fork server); empty once it has ended."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""
