"""Run a check in a forked child (a seccomp filter, Landlock or the fatbin wall must not reach the
test process) and get its findings back as JSON."""

from __future__ import annotations

import ctypes
import errno
import json
import os
from typing import Any, Callable


def in_forked_child(work: Callable[[Any], None], out: Any) -> Any:
    """``work(out)`` in a forked child, which fills ``out`` (a list or dict of plain data); the
    filled ``out`` comes back, with the repr of an exception that ended ``work`` appended (list)
    or under "error" (dict)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            work(out)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            if isinstance(out, list):
                out.append(repr(exc))
            else:
                out["error"] = repr(exc)
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    assert data, "the child died before reporting"
    return json.loads(data)


FORKS = (56, 57, 58)  # clone, fork, vfork (x86_64): a process that got through must not run on


def syscall(nr: int, *args: int) -> str:
    """Make system call ``nr`` directly: "ran", or the name of the errno it failed with."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    res = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if res == 0 and nr in FORKS:
        os._exit(0)  # the new process: gone at once
    return "ran" if res >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
