"""Running a build's compilers: one deadline for the whole build, whose fault a timeout is, and one
compile per unit across every process on the machine.

Trusted side (kag.core.eval.orchestrator.build calls it). Three rules:

- **The limit is a total.** Every compiler run of a build gets what is left of the build's
  deadline (``EvalOptions.timeouts.build_s``, default 180 s), so a compile bomb's verdict comes
  within that, whatever reruns or waits there were.
- **A timeout is the solution's fault only if its compiler had the CPU.** At the deadline the
  judge adds up the CPU time of the compiler's process group (nvcc's cicc and ptxas too, from
  /proc). A run that got at least ``STARVED_SHARE`` of one core over its wall time and did not
  finish is the solution's (a compile bomb runs flat out); one that got less was starved by the
  host (sixteen compilers on two cores) and is the evaluator's failure: ``judge_error``, never -1.
- **One compile per unit.** Identical compile units (the same cache key: the same sources, flags
  and toolchain) are compiled once: the first build to reach one takes a lock in the cache
  (``flight/``), the others wait on it and then read the object, or the failure, it left. A compile
  error or a timeout that was the solution's is remembered (signed, as objects are), so eight
  submissions of one broken solution pay for one compile, not eight.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import attrs

STARVED_SHARE = 0.5  # of one core, over the run's wall time: less at a timeout is the host's fault
FLIGHT_POLL_S = 0.05


@attrs.define
class RunOutcome:
    rc: int
    out: str
    wall_s: float = 0.0
    cpu_s: float = 0.0  # of the compiler's process group, read at a timeout
    timed_out: bool = False
    starved: bool = False  # timed out without its share of the CPU: the evaluator's failure

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out


def group_cpu_s(pgid: int) -> float:
    """CPU seconds of every live process in process group ``pgid``, with what each already
    collected from the children it waited for (user + system, from /proc/<pid>/stat)."""
    from kag.core.trust.process_tree import process_table

    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return sum(sum(int(x) for x in fields[11:15]) for _, fields in process_table() if int(fields[2]) == pgid) / tick


def run(cmd: list[str], cwd: Path, deadline: float, env: dict[str, str] | None = None,
        idle: bool = True) -> RunOutcome:
    """One compiler run until ``deadline`` (monotonic); on time-out its whole process group is
    killed (nvcc spawns cicc and ptxas) after its CPU time is read. ``idle``: at SCHED_IDLE on a
    GPU host (kag.core.eval.orchestrator.timing_lock.host_slot is None there)."""
    from kag.core.eval.orchestrator.timing_lock import build_affinity, host_slot

    start = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                text=True, errors="replace", start_new_session=True)
    except OSError as exc:
        return RunOutcome(127, f"{cmd[0]}: cannot run: {exc}")
    cores = build_affinity()  # on a GPU host: a core per GPU left to timings (nvcc's children inherit it)
    if cores:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(proc.pid, cores)
    if idle and host_slot() is None:
        # a GPU host, where builds run beside timings: the compilers take only CPU time nothing else
        # wants, and a timing's judge and candidate preempt them at once. Beside 8 builds on 15 of an
        # H100 host's 16 cores an honest launch-bound ReLU was credited 1.5-1.8 ms in 2 of 6 evaluations,
        # 0.1-0.2 ms at SCHED_IDLE (bench/results/2026-11-26-7bd63b4-h100). Not on a CPU host: its builds wait for timings
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setscheduler(proc.pid, os.SCHED_IDLE, os.sched_param(0))
    try:
        out, _ = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
        return RunOutcome(proc.returncode, out, wall_s=time.monotonic() - start)
    except subprocess.TimeoutExpired:
        wall = time.monotonic() - start
        cpu = group_cpu_s(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        starved = cpu < STARVED_SHARE * wall
        return RunOutcome(-1, f"timed out after {wall:.0f} s with {cpu:.1f} s of CPU", wall_s=wall, cpu_s=cpu,
                          timed_out=True, starved=starved)


@contextlib.contextmanager
def one_compile(cache: Path, key: str, deadline: float) -> Iterator[bool]:
    """Hold the machine-wide lock of compile unit ``key`` (yields True), or give up at ``deadline``
    (yields False: another build has held it that long). Builds of the same unit take turns; the
    second finds the first's object or failure in the cache."""
    folder = cache / "flight"
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(FLIGHT_POLL_S)
        yield True
    finally:
        os.close(fd)


def remembered_failure(store: Any, key: str, left_s: float) -> RunOutcome | None:
    """A failure another build of this unit left, None if there is none (or it was a timeout under
    a shorter limit than the ``left_s`` this build has)."""
    data = store.read(key)
    if data is None:
        return None
    head, _, log = data.decode("utf-8", "replace").partition("\n")
    rc, _, wall = head.partition(" ")
    outcome = RunOutcome(int(rc), log, wall_s=float(wall or 0.0), timed_out=int(rc) == -1)
    if outcome.timed_out and left_s > 1.2 * outcome.wall_s:
        return None  # this build may give it longer
    return outcome


# what a compiler says when the machine, not the source, failed it: never kept for the next build
HOST_FAILURES = ("cannot create temporary file", "no space left on device", "read-only file system",
                 "permission denied", "cannot allocate memory", "out of memory", "killed signal", "cannot run")


def host_failure(outcome: RunOutcome) -> bool:
    """Whether the run failed for the machine's sake: starved of CPU, killed by a signal, out of
    memory or disk, a folder it could not write."""
    text = outcome.out.lower()
    return outcome.starved or (outcome.rc < 0 and not outcome.timed_out) or outcome.rc == 127 or \
        any(marker in text for marker in HOST_FAILURES)


def remember_failure(store: Any, key: str, outcome: RunOutcome) -> None:
    """Keep a failure that is the solution's (a compile error, a timeout with the CPU) for the next
    build of the same unit; one the machine caused is not kept (the next build may not meet it)."""
    if not host_failure(outcome):
        store.write(key, f"{outcome.rc} {outcome.wall_s:.1f}\n{outcome.out}".encode())
