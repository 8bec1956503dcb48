"""Scratch folders this process makes, remembered so that a Ctrl-C which ends a command at once
(``os._exit``, without unwinding the threads still in an episode) can still remove them.

Either side of the trust boundary: it holds paths only. A folder is removed by its owner as before;
``remove_all`` is the interrupt's sweep over whatever is left.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading

_MADE: set[str] = set()
_LOCK = threading.Lock()
_PRUNE_AT = 512  # a long run makes thousands: forget the ones already removed now and then


def mkdtemp(prefix: str, dir: str | os.PathLike[str] | None = None) -> str:
    """``tempfile.mkdtemp`` (mode 0700), remembered for ``remove_all``."""
    path = tempfile.mkdtemp(prefix=prefix, dir=dir)
    remember(path)
    return path


def remember(path: str) -> None:
    """A folder another process made for this one's work (a judge's candidate folder), swept too."""
    with _LOCK:
        if len(_MADE) >= _PRUNE_AT:
            _MADE.difference_update([p for p in _MADE if not os.path.lexists(p)])
        _MADE.add(path)


def remove_all() -> list[str]:
    """Remove every remembered folder still present (call it after the processes using them are
    stopped); the ones removed."""
    with _LOCK:
        paths = sorted(_MADE)
        _MADE.clear()
    removed = []
    for path in paths:
        if os.path.lexists(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
