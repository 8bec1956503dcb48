"""One timing slot per device, machine-wide, and the load each timing was taken under.

Trusted side (the judge and the orchestrator; the candidate cannot open the lock folder: Landlock
lets it read only the system's paths and its evaluation's folder, and every lock is taken after
the judge forked it, with close-on-exec descriptors).

Timing is fair only on a quiet device. ``TimingSlot.exclusive`` is held around each timed phase
(the baselines, the candidate's timed calls): an ``flock`` on ``<lock dir>/timing-<device>.lock``,
so it works across processes (several ``kag`` commands, ``kag serve``, ``kag eval``, the data
filter), with a FIFO queue of tickets so that waiters are served in order. ``TimingSlot.shared`` is
held around heavy work that would slow someone else's timing (builds, a judge importing torch): it
runs alongside other heavy work, never while a timing holds or waits for the slot. Both waits are
bounded: past the bound the phase goes on unlocked and its ``TimingConditions`` say so.

On a GPU host builds keep off one core per GPU (``build_affinity``): GPUs time side by side, so
heavy work is not held off their timings, but a launch-bound timing finds a core no build uses.

``LoadMeter`` measures what the lock cannot prevent (other users' work on the machine): the CPUs
busy with work other than this evaluation's during the timed loops (``/proc/stat`` less the CPU
time of the judge and its candidate), with the load average. The judge refuses to cache a baseline
timed under load and re-times the baselines when their conditions and the candidate's differ.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import attrs

EXCLUSIVE_WAIT_S = 900.0  # a timing waits at most this long for the slot, then times unlocked (and says so)
SHARED_WAIT_S = 300.0  # heavy work waits at most this long for timings to end
POLL_S = 0.01
LOADED_SHARE = 0.25  # a timing is "under load" when other work kept this share of the CPUs busy
DIFFER_SHARE = 0.25  # baselines and candidate timed under loads further apart than this share: re-timed


def lock_dir() -> Path:
    """``$KAG_LOCK_DIR``, else ``<tmp>/kag-locks``: the folder of the GPU pool's locks too."""
    return Path(os.environ.get("KAG_LOCK_DIR") or Path(tempfile.gettempdir()) / "kag-locks")


def slot_name(device: str, visible: str | None = None) -> str:
    """``cpu`` for the CPU, ``gpu-<id>`` for the GPU ``visible`` (CUDA_VISIBLE_DEVICES's value)."""
    if not device.startswith("cuda"):
        return "cpu"
    return f"gpu-{(visible or '0').split(',')[0].strip() or '0'}"


def host_slot() -> str | None:
    """The slot heavy work on this host must not overlap: the CPU's on a machine with no GPU (a
    GPU's timing needs a quiet host too, but GPUs time side by side: not serialised here)."""
    return None if os.path.exists("/dev/nvidiactl") else "cpu"


def host_gpu_count() -> int:
    """The host's GPUs as device files (``/dev/nvidia0``...): all of them, whatever
    CUDA_VISIBLE_DEVICES this process was given (each GPU's timing needs its core)."""
    try:
        return sum(1 for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())
    except OSError:
        return 0


def build_cores(cores: list[int], gpus: int) -> set[int] | None:
    """The cores builds may use: all but the last ``gpus`` (one kept free for each GPU's timing);
    None (no restriction) without GPUs, or where that would leave builds fewer than 2 cores."""
    if gpus <= 0 or len(cores) - gpus < 2:
        return None
    return set(sorted(cores)[: len(cores) - gpus])


def parse_cores(text: str, highest: int = 4095) -> set[int]:
    """``0-11,14`` -> {0, ..., 11, 14} (the kernel's cpu-list format), cores above ``highest``
    dropped; ValueError if malformed."""
    cores: set[int] = set()
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        first, last = int(lo), int(hi) if dash else int(lo)
        if first < 0 or last < first:
            raise ValueError(part)
        cores.update(range(first, min(last, highest) + 1))
    return cores


@functools.lru_cache(maxsize=1)
def build_affinity() -> frozenset[int] | None:
    """Where builds run on this host. GPUs time side by side, so builds are not held off their
    timings (``host_slot``); instead they never use one core per GPU, which a launch-bound GPU
    timing (tens of microseconds a call) then finds idle. None on a host without GPUs (there the
    CPU's timing slot keeps builds away). ``$KAG_BUILD_CORES`` overrides it: ``all`` (no
    restriction) or a core list such as ``0-11,14`` (a shared machine's own split)."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    chosen = os.environ.get("KAG_BUILD_CORES", "").strip()
    if chosen == "all":
        return None
    if chosen:
        try:
            allowed = parse_cores(chosen, cores[-1]) & set(cores)
        except ValueError:
            allowed = set()
        if allowed:
            return frozenset(allowed)
        # a user's setting, not a solution's fault: say so once and keep the default
        print(f"kag: KAG_BUILD_CORES={chosen!r} names none of this process's cores {cores[0]}-{cores[-1]}; "
              "set it to 'all' or a list such as 0-11,14 (ignored: builds keep off one core per GPU)",
              file=sys.stderr)
    allowed = build_cores(cores, host_gpu_count())
    return frozenset(allowed) if allowed else None


@attrs.define
class TimingConditions:
    """How one timed phase was taken: its wait for the slot and the machine's load meanwhile."""

    slot: str
    locked: bool = False  # False: the wait passed its bound (or the lock folder was unusable)
    wait_s: float = 0.0
    queued_ahead: int = 0  # timings ahead of this one when it asked for the slot
    queued_behind: int = 0  # timings waiting when it got it
    loadavg_1m: float | None = None
    cpus: int = 1
    others_cpus: float | None = None  # CPUs other work kept busy during the timed loops
    timed_s: float = 0.0  # wall time of the timed loops the load was measured over
    started_at: float = 0.0  # time.time() when the slot was had ...
    ended_at: float = 0.0  # ... and when the load was read, after the timed loops

    @property
    def others_share(self) -> float:
        return (self.others_cpus or 0.0) / max(1, self.cpus)

    def loaded(self) -> str | None:
        """Why this timing was not taken on a quiet machine, or None."""
        if not self.locked:
            return f"timed without the {self.slot} timing slot (waited {self.wait_s:.3g} s)"
        if self.others_cpus is not None and self.others_share > LOADED_SHARE:
            return (f"other work kept {self.others_cpus:.2f} of {self.cpus} CPUs busy while it was timed "
                    f"(load average {self.loadavg_1m})")
        return None


def host_work(lock_dir: str | Path | None = None, timeout_s: float | None = None) -> contextlib.AbstractContextManager[bool]:
    """Heavy work on this host (compilers, importing torch): ``TimingSlot.shared`` of the CPU's slot
    on a host without a GPU, waited for at most ``timeout_s`` (default SHARED_WAIT_S; yields whether
    it was had in time); on a GPU host, nothing to wait for."""
    host = host_slot()
    if not host:
        return contextlib.nullcontext(True)
    return TimingSlot(host, lock_dir).shared(SHARED_WAIT_S if timeout_s is None else max(0.0, timeout_s))


def differ(a: TimingConditions, b: TimingConditions) -> bool:
    """Whether timings taken under ``a`` and ``b`` cannot be compared."""
    return a.locked != b.locked or abs(a.others_share - b.others_share) > DIFFER_SHARE


def _cpu_seconds(pid: int | str, ticks: float) -> float:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (every thread)
    except (OSError, IndexError, ValueError):
        return 0.0


def _busy_seconds(ticks: float) -> float | None:
    try:
        with open("/proc/stat", "rb") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / ticks


class LoadMeter:
    """CPU time the machine spent on work other than ``pids`` (and this process) during ``measuring``
    blocks, summed over them."""

    def __init__(self, pids: tuple[int, ...] = ()) -> None:
        self.pids = ("self",) + tuple(pids)
        self.ticks = float(os.sysconf("SC_CLK_TCK"))
        self.others_s = 0.0
        self.wall_s = 0.0
        self.usable = _busy_seconds(self.ticks) is not None

    @contextlib.contextmanager
    def measuring(self) -> Iterator[None]:
        busy0, own0, t0 = _busy_seconds(self.ticks), self._own(), time.perf_counter()
        try:
            yield
        finally:
            busy1, own1, t1 = _busy_seconds(self.ticks), self._own(), time.perf_counter()
            if busy0 is not None and busy1 is not None:
                self.others_s += max(0.0, (busy1 - busy0) - (own1 - own0))
                self.wall_s += t1 - t0

    def _own(self) -> float:
        return sum(_cpu_seconds(p, self.ticks) for p in self.pids)

    def fill(self, conditions: TimingConditions) -> None:
        conditions.ended_at = round(time.time(), 3)
        conditions.timed_s = round(self.wall_s, 3)
        if self.usable and self.wall_s > 0.05:  # /proc/stat counts in ticks (10 ms): too coarse below
            conditions.others_cpus = round(self.others_s / self.wall_s, 3)
        with contextlib.suppress(OSError):
            conditions.loadavg_1m = round(os.getloadavg()[0], 2)


class TimingSlot:
    """The timing slot ``name`` of this machine (see the module's docstring)."""

    def __init__(self, name: str, directory: str | Path | None = None) -> None:
        self.name = name
        self.dir = Path(directory) if directory else lock_dir()
        self.lock_path = self.dir / f"timing-{name}.lock"
        self.queue_path = self.dir / f"timing-{name}.queue"

    def _open(self, path: Path) -> int:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        with contextlib.suppress(OSError):  # one machine-wide slot for every user (the umask would say 0644)
            if os.fstat(fd).st_uid == os.geteuid():
                os.fchmod(fd, 0o666)
        return fd

    @contextlib.contextmanager
    def _queue(self) -> Iterator[dict[str, Any]]:
        """The queue of waiting timings ({"next": ticket, "waiting": {ticket: pid}}), read and
        written under its own flock; waiters whose process is gone are dropped."""
        fd = self._open(self.queue_path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, 1 << 20, 0)
            try:
                data = json.loads(raw) if raw.strip() else {}
            except ValueError:
                data = {}
            waiting = {str(t): int(p) for t, p in dict(data.get("waiting") or {}).items() if _alive(int(p))}
            data = {"next": int(data.get("next") or 0), "waiting": waiting}
            before = json.dumps(data, sort_keys=True)
            yield data
            after = json.dumps(data, sort_keys=True).encode()
            if after != before.encode() or len(after) != len(raw):
                os.ftruncate(fd, 0)
                os.pwrite(fd, after, 0)
        finally:
            os.close(fd)

    def waiting(self) -> int:
        """Timings waiting for the slot now."""
        try:
            with self._queue() as q:
                return len(q["waiting"])
        except OSError:
            return 0

    @contextlib.contextmanager
    def exclusive(self, timeout_s: float = EXCLUSIVE_WAIT_S) -> Iterator[TimingConditions]:
        """Hold the slot alone, served in the order asked; yields the phase's conditions (the
        caller's ``LoadMeter`` fills in the load)."""
        cond = TimingConditions(slot=self.name, cpus=os.cpu_count() or 1)
        start = time.perf_counter()
        fd = None
        ticket = None
        try:
            try:
                with self._queue() as q:
                    ticket = str(q["next"])
                    q["next"] += 1
                    cond.queued_ahead = len(q["waiting"])
                    q["waiting"][ticket] = os.getpid()
                fd = self._open(self.lock_path)
            except OSError as exc:
                if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.ENOENT):
                    raise
            deadline = start + timeout_s
            while fd is not None:
                with self._queue() as q:
                    first = min(q["waiting"], key=int, default=ticket) == ticket
                    if first and _try_flock(fd, fcntl.LOCK_EX):
                        del q["waiting"][ticket]
                        ticket = None
                        cond.locked = True
                        cond.queued_behind = len(q["waiting"])
                        break
                if time.perf_counter() > deadline:
                    break
                time.sleep(POLL_S)
            cond.wait_s = round(time.perf_counter() - start, 3)
            cond.started_at = round(time.time(), 3)
            yield cond
        finally:
            if ticket is not None:
                with contextlib.suppress(OSError), self._queue() as q:
                    q["waiting"].pop(ticket, None)
            if fd is not None:
                os.close(fd)  # releases the flock

    @contextlib.contextmanager
    def shared(self, timeout_s: float = SHARED_WAIT_S) -> Iterator[bool]:
        """Heavy work: alongside other heavy work, never while a timing holds or waits for the slot.
        Yields whether it got the slot within ``timeout_s`` (else it goes on anyway)."""
        deadline = time.perf_counter() + timeout_s
        fd = None
        got = False
        try:
            with contextlib.suppress(OSError):
                fd = self._open(self.lock_path)
            while fd is not None:
                with self._queue() as q:
                    if not q["waiting"] and _try_flock(fd, fcntl.LOCK_SH):
                        got = True
                        break
                if time.perf_counter() > deadline:
                    break
                time.sleep(POLL_S * 5)
            yield got
        finally:
            if fd is not None:
                os.close(fd)


def _try_flock(fd: int, kind: int) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
