"""One heap policy for the processes the judge times, set in the judge before it forks them.

Trusted side: the judge calls ``steady_heap`` at its start; the candidate and the baseline runner are
forks of it and inherit glibc's malloc settings with its heap.

Why: glibc moves its mmap threshold up to the size of the last large block freed and gives the top of
its heap back to the kernel once more than twice that is free, so whether a call's output of a few
MiB comes from memory already mapped or from fresh pages (one fault for each 4 KiB) depends on what
the process allocated before: a property of its history, not of the code timed. On the 2-core VM
an OpenMP ReLU over 4 MiB took 0.27-0.47 ms a call in some processes and 1.95-2.2 ms in others
(665-675 page faults a call against 3; 3 of 8 plain processes in one series); through the judge an honest
ReLU read 0.18-0.2x eager in 12 of 19 evaluations and 0.95-1.42x in the rest, and the baseline runner
draws its own lot, so a speed-up was a ratio of two coin tosses. With the threshold fixed (which also
stops glibc moving it) and the top kept, 10 of 10 processes took 0.35-0.5 ms.

Both sides alike: the baselines and the candidate get the same policy. Blocks above
``MMAP_THRESHOLD`` (glibc's largest) are still mapped afresh by each allocation, on both sides. A
solution may change its own process's settings (mallopt); that moves only its own time, as any
allocator of its own would.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1  # mallopt's parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest on 64 bits (DEFAULT_MMAP_THRESHOLD_MAX): mallopt refuses more
TRIM_THRESHOLD = (1 << 31) - 1  # mallopt's largest (an int): the heap's top is given back only past 2 GiB free
POLICY = "glibc malloc: mmap threshold 32 MiB, trim threshold 2 GiB"


def steady_heap() -> str:
    """Fix this process's malloc thresholds (inherited by the children it forks after); the policy
    applied, or why none was (not glibc)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return "unchanged (no mallopt: not glibc)"
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    if not mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        return "unchanged (mallopt refused the mmap threshold)"
    if not mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD):
        return "unchanged (mallopt refused the trim threshold)"
    return POLICY
