"""What an allowed ioctl costs under the candidate's seccomp allow-list (kag.core.trust.seccomp_allow).

Runs on any Linux machine with libseccomp, no GPU: in a forked child without a filter and in one with
the candidate's filter, the nanoseconds per call of FIONREAD on a pipe (a terminal/socket-type command)
and of an NVIDIA-type command ('F', which a pipe answers with EINVAL), min of 3 x 200000 calls.
    TREE=<a kag checkout> python3 bench/scripts/ioctl_cost.py      (TREE defaults to this checkout)
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.environ.get("TREE", str(Path(__file__).resolve().parents[2])))
from kag.core.trust import seccomp_allow  # noqa: E402

COMMANDS = {"FIONREAD": 0x541B, "type F (0xC0204621)": 0xC0204621}


def per_call_ns(fd: int, cmd: int, n: int = 200_000) -> float:
    buf = bytearray(8)
    start = time.perf_counter_ns()
    for _ in range(n):
        try:
            fcntl.ioctl(fd, cmd, buf)
        except OSError:
            pass
    return (time.perf_counter_ns() - start) / n


def in_child(filtered: bool, fd: int) -> dict[str, float]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        if filtered:
            seccomp_allow.apply_allow_list(own_pid=os.getpid())
        out = {name: min(per_call_ns(fd, cmd) for _ in range(3)) for name, cmd in COMMANDS.items()}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 4096)
    os.waitpid(pid, 0)
    return json.loads(data)


def main() -> None:
    fd, _ = os.pipe()
    print(os.environ.get("TREE", "this checkout"),
          json.dumps({"none": in_child(False, fd), "filter": in_child(True, fd)}))


if __name__ == "__main__":
    main()
