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
_TAGS: set[tuple[str, str]] = set()  # (folder, tag): folders another process names with the tag
_LOCK = threading.Lock()
_PRUNE_AT = 512  # a long run makes thousands: forget the ones already removed now and then
TAG_ENV = "KAG_SCRATCH_TAG"  # set in a judge: its folders carry the tag its orchestrator knows


def mkdtemp(prefix: str, dir: str | os.PathLike[str] | None = None) -> str:
    """``tempfile.mkdtemp`` (mode 0700), remembered for ``remove_all``; in a process given a tag
    (``TAG_ENV``), the tag is in the name."""
    tag = os.environ.get(TAG_ENV)
    path = tempfile.mkdtemp(prefix=f"{prefix}{tag}-" if tag else prefix, dir=dir)
    remember(path)
    return path


def remember_tagged(tag: str, folders: "list[str]") -> None:
    """Folders a process about to start will make in ``folders`` with ``tag`` in their names: swept
    too, whether or not it lived to say which (a Ctrl-C may kill it between making one and
    telling)."""
    with _LOCK:
        _TAGS.update((f, tag) for f in folders)


def forget_tagged(tag: str) -> None:
    with _LOCK:
        _TAGS.difference_update([t for t in _TAGS if t[1] == tag])


def remove_tagged(tag: str) -> None:
    """Remove the folders carrying ``tag`` (its process is dead), then forget the tag: a judge killed
    by a Ctrl-C before it removed its candidates' folders left them once its tag was forgotten."""
    import glob

    with _LOCK:
        folders = sorted({f for f, t in _TAGS if t == tag})
    for folder in folders:
        for path in glob.glob(os.path.join(glob.escape(folder), f"kag-*-{tag}-*")):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
    forget_tagged(tag)


def remember(path: str) -> None:
    """A folder another process made for this one's work (a judge's candidate folder), swept too."""
    with _LOCK:
        if len(_MADE) >= _PRUNE_AT:
            _MADE.difference_update([p for p in _MADE if not os.path.lexists(p)])
        _MADE.add(path)


def remove_all() -> list[str]:
    """Remove every remembered folder still present (call it after the processes using them are
    stopped); the ones removed."""
    import glob

    with _LOCK:
        paths = sorted(_MADE)
        _MADE.clear()
        tagged = sorted(_TAGS)
        _TAGS.clear()
    for folder, tag in tagged:
        paths += sorted(p for p in glob.glob(os.path.join(glob.escape(folder), f"kag-*-{tag}-*")) if os.path.isdir(p))
    removed = []
    for path in paths:
        if os.path.lexists(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
