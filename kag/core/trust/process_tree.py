"""The process tree below a process, read from /proc, and a sweep that kills all of it.

Trusted side: the judge finds and kills what a candidate started where it has no PID namespace of
its own (kag.core.trust.isolation); the CLI and the build read the same table.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Iterator


def process_table() -> Iterator[tuple[int, list[bytes]]]:
    """Each process's pid and the fields of its /proc/<pid>/stat after the command name (state,
    ppid, pgrp, ...; utime..cstime are [11:15]); processes that vanish meanwhile are skipped."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 14:
            yield int(entry), fields


def descendants(root_pid: int, skip: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Live processes below ``root_pid`` (by parent links in /proc), not following ``skip``."""
    children: dict[int, list[int]] = {}
    for pid, fields in process_table():
        if fields[0] != b"Z":  # a zombie is dead already (its parent reaps it)
            children.setdefault(int(fields[1]), []).append(pid)
    out, todo = [], [root_pid]
    while todo:
        for kid in children.get(todo.pop(), []):
            if kid in skip:
                continue
            out.append(kid)
            todo.append(kid)
    return out


def sweep_descendants(root_pid: int, rounds: int = 20, spare: set[int] | frozenset[int] = frozenset()) -> int:
    """SIGKILL every descendant of ``root_pid`` (a subreaper's orphans included) but ``spare`` and
    theirs, until none is left; returns how many were killed. For machines where the candidate gets
    no PID namespace."""
    killed = 0
    for _ in range(rounds):
        found = [p for p in descendants(root_pid, skip=spare)]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        _reap_children()
        time.sleep(0.01)
    return killed


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
