"""Who the scheduler runs first on a busy host: the judge above its children, and on a GPU the child
whose windows are being timed above the rest of the host's work while they run.

Trusted side (the judge sets its own and its children's priority; a candidate cannot raise its own:
it has no CAP_SYS_NICE and RLIMIT_NICE stays 0, so it can only lower it).

Why the timed child is raised: a short kernel's window is bounded by its call's CPU path (the
doorbell, the forward, the launch). On an idle host that path hides under the kernel; with other
work on the host's cores (other evaluations' builds and checks, a neighbour's jobs) it does not, and
both sides read the path instead of the kernel (an honest 0.034 ms kernel read 1.00x eager with six
evaluations at once on one H200, 1.41-1.47x alone). Raising whichever child holds the GPU's timing
slot, the candidate and the baseline runner alike, for exactly its windows, lets its path win its
core back. On the CPU backend timing holds the host's one slot (nothing heavy runs beside it), and
the judge's sampler must keep its margin over a candidate that spins threads: not raised there.

Where the kernel groups tasks by session (``sched_autogroup_enabled``, tasks in the root CPU cgroup),
a thread's nice counts only inside its session's group, and the judge and each child are sessions of
their own (``start_new_session``, ``setsid``): their groups' nice is set as well (``/proc/<pid>/autogroup``),
or neither raise would count against another session's work (an independent attack measured a nice -5
spinner in its own session sharing a CPU 50/50 with a nice 0 one in another).

What a candidate can do with it: read its own priority (getpriority, /proc/self/stat) and learn it
is in a window, which it knows anyway (it runs only in windows, and every window is timed or
compared in secret); start threads while raised (they inherit it: every thread is put back while
the process is stopped after its windows); spin while raised (its own time grows, the judge's
thread stays 10 levels above it, and other GPUs' timed children are raised as much).
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any, Iterator

JUDGE_NICE = -10  # the judge's priority over its children (root); otherwise theirs lowered by as much
TIMED_NICE = -5  # the timed child's while its windows run (root, a GPU); KAG_TIMED_NICE=0: not raised


def above_its_children(*children: int) -> str:
    """Put the judge's thread above its children in the scheduler (after the fork: they must not
    inherit it): its sampler must stop the candidate while a call runs, and threads the candidate spins
    up during its calls had starved it on a 2-core machine (a fallback's stops landed between calls).
    Both children alike, so the candidate and the baselines are timed at one priority."""
    try:  # the sampler's sleeps end when asked, not up to 50 us later
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK, 1 ns
    except (OSError, AttributeError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, 0, JUDGE_NICE)  # Linux: this thread (the one that samples)
        set_autogroup(os.getpid(), JUDGE_NICE)  # the judge's session (its own)
        return "judge raised"
    except OSError:
        pass
    for pid in children:  # not root: the children lowered instead, which needs no privilege
        try:
            os.setpriority(os.PRIO_PROCESS, pid, -JUDGE_NICE)
        except OSError:
            return "none"
    return "children lowered"


def timed_nice() -> int:
    """The timed child's nice value: ``KAG_TIMED_NICE`` (0 or more: not raised), else ``TIMED_NICE``,
    never at or above the judge's own."""
    try:
        nice = int(os.environ.get("KAG_TIMED_NICE", TIMED_NICE))
    except ValueError:
        nice = TIMED_NICE
    return max(nice, JUDGE_NICE + 1)


@functools.lru_cache(maxsize=1)
def grouped_by_session() -> bool:
    """Whether this kernel groups tasks by session (read once: a host setting)."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled", encoding="ascii") as fh:
            return fh.read().strip() == "1"
    except OSError:
        return False


def autogroup_nice(pid: int) -> int | None:
    """The nice of ``pid``'s session group where the kernel groups by session, else None."""
    if not grouped_by_session():
        return None
    try:
        with open(f"/proc/{pid}/autogroup", encoding="ascii") as fh:
            return int(fh.read().split()[-1])  # "/autogroup-123 nice 0"
    except (OSError, ValueError, IndexError):
        return None


def set_autogroup(pid: int, nice: int) -> bool:
    """Set ``pid``'s session group's nice (root for a raise); False where there is none or it is refused."""
    if autogroup_nice(pid) is None:
        return False
    try:
        with open(f"/proc/{pid}/autogroup", "w", encoding="ascii") as fh:
            fh.write(str(nice))
        return True
    except OSError:
        return False


def threads_of(pid: int) -> list[int]:
    """Every thread of ``pid`` ([] once it is gone): Linux's priority is per thread."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _set(tid: int, nice: int) -> bool:
    try:
        os.setpriority(os.PRIO_PROCESS, tid, nice)
        return True
    except OSError:
        return False


@contextlib.contextmanager
def timed_priority(proc: Any, raise_it: bool = True) -> Iterator[int | None]:
    """While the block runs ``proc``'s windows (a kag.core.eval.judge.candidate_process.CandidateProcess),
    every thread of it, and its session's group where there is one, at ``timed_nice()``; afterwards,
    with the process stopped so that no thread can start meanwhile, every thread (those it started
    inside included) back at the nice its main thread had. Yields the nice applied, None where it was not (a CPU, not root, the process gone)."""
    nice = timed_nice()
    tids = threads_of(proc.pid) if raise_it and nice < 0 else []
    before: dict[int, int] = {}
    for tid in tids:
        try:
            before[tid] = os.getpriority(os.PRIO_PROCESS, tid)
        except OSError:
            continue
    applied = [tid for tid in before if before[tid] > nice and _set(tid, nice)]
    group = autogroup_nice(proc.pid) if applied else None  # its session's group, where there is one
    group_raised = group is not None and group > nice and set_autogroup(proc.pid, nice)
    try:
        yield nice if applied else None
    finally:
        if group_raised:
            set_autogroup(proc.pid, group)
        if applied:
            home = before.get(proc.pid, max(before.values()))
            if proc.stop_sent or proc.stopped:  # confirmed: a thread started after the listing would keep it
                with contextlib.suppress(Exception):
                    proc.stop()
            for tid in threads_of(proc.pid):
                _set(tid, before.get(tid, home))
