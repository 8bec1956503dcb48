"""The judge's heap policy (kag.core.eval.judge.heap): a call's blocks of a few MiB come from memory
already mapped in every process the judge forks, not from fresh pages in some processes only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]

# Two 4 MiB blocks a call, both freed after it (a call's output and an intermediate): with glibc's own
# thresholds the freed top passes twice the (moved) mmap threshold and is given back, so every call
# faults its pages in again. The parent's policy is applied, then the call is measured in a fork.
PROBE = r"""
import ctypes, json, os, resource, sys
sys.path.insert(0, sys.argv[2])
if sys.argv[1] == "1":
    from kag.core.eval.judge.heap import steady_heap
    policy = steady_heap()
else:
    policy = None
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
n = 4 << 20

def call():
    a = libc.malloc(n); libc.memset(a, 1, n)
    b = libc.malloc(n); libc.memset(b, 1, n)
    libc.free(a); libc.free(b)

r, w = os.pipe()
if os.fork() == 0:
    call()
    faults = []
    for _ in range(5):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        call()
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    os.write(w, json.dumps(faults).encode())
    os._exit(0)
os.close(w)
print(json.dumps({"policy": policy, "faults": json.loads(os.read(r, 4096))}))
"""


def probe(policy: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, "1" if policy else "0", str(REPO)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_forked_child_reuses_its_heap_under_the_judges_policy() -> None:
    """Without the policy every call faults in its two blocks (some 2,000 pages: the control); with it,
    set in the parent before the fork, the child's calls fault in none."""
    from kag.core.eval.judge.heap import POLICY

    control = probe(False)
    assert min(control["faults"]) > 1000, control
    steady = probe(True)
    assert steady["policy"] == POLICY, steady
    assert max(steady["faults"]) < 50, steady
