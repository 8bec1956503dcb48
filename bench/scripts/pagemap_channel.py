"""A channel between concurrent candidates that kag does not close: /proc/self/pagemap's bit 56.

Bit 56 of a page's pagemap entry says the page is mapped by this process alone (its map count is
1). A file page mapped by another process as well reads 0. So one process signals a bit per page
by mapping (and touching) a page of a file both can read, and a confined candidate reads its own
pagemap: it needs no write, no shared memory, nothing of another process. This script runs the
sender unconfined (another candidate's mapping is the same) and the receiver confined as a
candidate is (kag.core.trust.isolation.CandidatePlan, fork_in_namespace, the allow-list filter),
with 16 pages of libtorch_cpu.so far apart, and prints the bits sent and received.

    python3 bench/scripts/pagemap_channel.py [--bits 0xA5C3]

Why it stays open: the candidate must read its own /proc (CUDA's driver and torch read maps,
status and the task folder; the driver names its threads through /proc/self/task/<tid>/comm), and
Landlock grants a folder with everything under it, the task folders of threads started later
included; seccomp cannot see a path. Needs root (namespaces) and Landlock.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
PAGE = mmap.PAGESIZE


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", default="0xA5C3", help="16 bits to send")
    args = ap.parse_args()
    import torch

    from kag.core.trust import confine
    from kag.core.trust.isolation import candidate_plan, fork_in_namespace

    path = str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so")
    size = os.path.getsize(path)
    offsets = [(size // 3 + i * 97 * PAGE) // PAGE * PAGE for i in range(16)]
    bits = [int(b) for b in format(int(args.bits, 0) & 0xFFFF, "016b")]
    ready_r, ready_w = os.pipe()
    sender = os.fork()
    if sender == 0:  # the other candidate: maps and touches the pages of its 1 bits, and holds them
        fd = os.open(path, os.O_RDONLY)
        held = [mmap.mmap(fd, PAGE, mmap.MAP_PRIVATE, mmap.PROT_READ, offset=off) for off, b in zip(offsets, bits) if b]
        for m in held:
            _ = m[0]
        os.write(ready_w, b"x")
        time.sleep(60)
        os._exit(0)
    os.read(ready_r, 1)
    fd = os.open(path, os.O_RDONLY)  # as a candidate opens a library it may read
    plan = candidate_plan(cuda=False)
    out_r, out_w = os.pipe()

    def receiver() -> None:
        os.close(out_r)
        plan.apply_in_child()
        confine.apply_seccomp(own_pid=os.getpid())
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        try:
            with open("/proc/self/pagemap", "rb") as pm:
                got = []
                for off in offsets:
                    address = libc.mmap(None, PAGE, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, off)
                    ctypes.string_at(address, 1)
                    pm.seek(address // PAGE * 8)
                    got.append(0 if (struct.unpack("<Q", pm.read(8))[0] >> 56) & 1 else 1)
            report = {"pagemap": "read", "received": got, "layers": plan.applied}
        except OSError as exc:
            report = {"pagemap": f"refused: {exc}", "layers": plan.applied}
        os.write(out_w, json.dumps(report).encode())

    child, _ = fork_in_namespace(receiver, plan.namespaces)
    os.close(out_w)
    with os.fdopen(out_r, "rb") as fh:
        report = json.loads(fh.read() or b"{}")
    os.waitpid(child, 0)
    os.kill(sender, 9)
    os.waitpid(sender, 0)
    report["sent"] = bits
    if "received" in report:
        report["bits_right"] = sum(a == b for a, b in zip(bits, report["received"]))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
