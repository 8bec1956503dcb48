"""Provenance by where the work runs: the candidate's CPU time, sampled from outside it.

Trusted side (the judge). During *sampled windows* (windows like the timed ones, which the judge
places in secret among them and does not time) the judge stops the candidate at random moments
(SIGSTOP), reads each of its threads' program counter from ``/proc/<pid>/task/<tid>/syscall`` (a
stopped thread that was running user code shows a negative number, sp and pc; one blocked in a
system call shows the call and is idle), resumes it, and finds which mapped file each counter lies in (``/proc/<pid>/maps``). Nothing
the candidate does can change what the kernel reports here, and no flag of its own switches it off:
a kernel of PyTorch's runs in PyTorch's library whoever called it (Python, a C++ ``at::cpu::`` or
``at::native::`` call, ``redispatch``, a pointer from ``dlsym``, ctypes, RecordFunction switched off).

Each sample of a running thread is put in one of:
- ``solution``: the solution's built module (its build folder);
- ``torch``: PyTorch's compute libraries (libtorch_cpu.so, libtorch.so, libtorch_cuda.so: ATen's
  kernels and its dispatch, oneDNN and MKL linked in);
- ``foreign``: other libraries that compute (numpy, OpenBLAS, ...);
- ``runtime``: the interpreter and PyTorch's Python bindings, libc/libm/libstdc++, OpenMP, libc10
  (allocation, tensor metadata), the CUDA driver and runtime, cuBLAS and cuDNN's host code,
  anonymous memory (what honest code runs on too). On the CPU backend only files in the runtime's
  own folders (``trusted_prefixes``) are: anonymous code, a memory file's, a deleted file's or one
  elsewhere is ``foreign`` (PyTorch's code copied into a memfd and mapped over itself passed as the
  runtime's).
On the CPU backend the solution's work is computing, so the samples that compute are weighed: when
more than ``FOREIGN_SHARE`` of the ``solution``, ``torch`` and ``foreign`` samples are ``torch`` or
``foreign``, the work was done by another library's code, a violation. On a GPU the CPU mostly
launches and waits (``runtime``), and PyTorch's CUDA kernels cannot run at all
(kag.core.trust.fatbin_wall): there the share is of every running sample, which catches compute
moved to the CPU. Measured on the CPU examples: an honest C++ kernel has 10-25% of its computing
samples in PyTorch (allocation and dispatch); a fallback through at::cpu:: 95%.

The share is weighed four ways, any of which fails the candidate: of all computing samples; of the
*stops* that found some thread computing (threads spinning in the solution beside a fallback add samples,
never such moments, and a fallback spread over at::parallel_for's workers counts once a stop); of each
thread's samples; and of each window's *first* stop, which a candidate that notices stops (a gap in its
clock) and turns to its own code for the rest of the window cannot have foreseen. The first stop falls
uniformly within a call's time as the timed windows measured it. The judge samples more windows until
the stops can judge (``CpuProvenance.enough``), its sleeps end on time (a 1 ns timer slack, spinning for
the last 200 us) and it runs above the candidate in the scheduler (kag.core.eval.judge.judge): on a loaded
2-core machine a fallback beside spinning threads once left 12 computing stops in 384 windows, no
verdict, and passed. No verdict after all that, once windows were sampled, fails closed.

Shares can be diluted at the cost of speed: four threads spinning in the solution's module, the fallback run
on each of them in turn and the caller spinning twice as long as it took, left every share under half
(rotate_spinners_cpp: 63 of 4313 computing stops, reward 1 where PyTorch's worker threads did not show apart).
So the time is also counted, not shared: each stop adds a call's expected time for each thread it found in
PyTorch's or another library's code, and over the stops that is the threads' time in that code a call, which
no spinning thread shortens (``busy_verdicts``). Against the eager reference's time a call it fails a candidate
above ``BUSY_SHARE`` (surely: a Poisson bound on the count), over every stop or over the windows' first stops.
Measured on the VM (bench/results/2026-11-28-f36939e-cpu/): the 11 honest CPU solutions at most 0.0063x
eager's time (6 samples, a bound of 0); the 14 sampled fallbacks 0.19x to 6.5x (beside spinning threads,
which slow it), their bounds 0.155x and up. A fallback that runs PyTorch for a tenth of eager's work and spins
nowhere (the shares then catch nothing either) is at its floor: 0.063x, a bound of 0.049x, passed (at 0.73x
eager, slower than honest); less than a tenth goes unseen.

A sample in PyTorch's library that lies inside one of its exported bookkeeping functions (the
profiler every call runs under, RecordFunction, allocating an empty tensor, tensor metadata, the
dispatcher's lookup: found by name and size in the library's ``.dynsym`` and ``.symtab``) is ``runtime``: the harness's observer and an honest
binding's ``empty_like`` run there. In a tiny honest call they were most of the PyTorch samples
(``ThreadLocalSubqueue::begin_op`` alone 322 of 573, a 4 x 64 ReLU on the VM), enough to fail an
honest kernel. PyTorch's compute (``at::native`` kernels, TensorIterator loops, ``at::cpu::``) is in
none of them, however it is called.
"""

from __future__ import annotations

import functools
import math
import os
import random
import re
import signal
import time
from bisect import bisect_right
from typing import Any, Callable

import attrs

SAMPLES_PER_CALL = 12  # on average, spread at random over a call's expected time
MAX_SAMPLES_PER_CALL = 48  # at most, in a window (one run took 55985 samples, seconds of stops)
FOREIGN_SHARE = 0.5  # more than this share of the calls' samples in PyTorch's or another library's code ...
WILSON_Z = 3.0  # ... beyond three standard errors (an honest kernel at 25% is flagged with probability ~1e-4)
MIN_SAMPLES = 8  # no verdict on fewer samples
MIN_MOMENTS = 48  # the judge runs more sampled windows until this many stops found computing code (``enough``)
MIN_THREAD_SAMPLES = 24  # ... and this many computing samples in each thread seen outside the solution
# the absolute rule (``busy_verdicts``): the time the candidate's threads spent in PyTorch's or another library's
# computing code, a call, against the eager reference's time a call. Spinning threads, however many, take
# none of it away: a fallback's ATen kernel runs as long wherever it runs (longer beside spinners that take
# its cores); alone, 0.19x-0.31x of eager's time, which also holds eager's allocation and the harness's path. Measured on the VM (bench/results/2026-11-28-f36939e-cpu/): honest at most 0.0063x eager's time,
# fallbacks 0.19x and up (their Poisson bounds 0.155x and up).
BUSY_SHARE = 0.05  # more than this share of eager's time a call spent in another library's code ...
BUSY_Z = 3.0  # ... beyond three standard errors of the samples' count (a Poisson bound)
COMPUTING = frozenset({"solution", "torch", "foreign"})
OUTSIDE = frozenset({"torch", "foreign"})
TORCH_LIBS = re.compile(r"^libtorch(_cpu|_cuda|_cuda_linalg)?\.so")
RUNTIME_LIBS = re.compile(r"^(ld-linux|libc\.|libc-|libm\.|libm-|libpthread|libdl|librt|libstdc\+\+|libgcc|libgomp|"
                          r"libiomp|libc10|libcuda|libcudart|libcublas|libcudnn|libnvrtc|libpython|libz\.|libffi|"
                          r"libutil|libnvidia|libshm|libtorch_global|libtorch_python|libcupti|libkineto|libnvToolsExt|libnuma)")
# PyTorch's exported bookkeeping, by mangled name: the profiler and Kineto, RecordFunction, empty tensors
# (at::_ops::empty*, at::detail::empty*, at::native::empty*), TensorBase's accessors, the dispatcher's
# RecordFunction hook, the global context
BOOKKEEPING = re.compile(rb"^_ZN?K?(5torch8profiler|9libkineto|2at14RecordFunction|2at17getStepCallbacks"
                         rb"|2at25getStepCallbacksUnlessEmpty|2at4_ops10empty_like|2at4_ops13empty_strided"
                         rb"|2at4_ops5empty|2at6detail\d+empty|2at6native10empty_like|2at6native\d+empty_(strided_)?cpu"
                         rb"|2at10TensorBase|3c1010Dispatcher17runRecordFunction|2at13globalContext"
                         # found in .symtab (not exported): the profiler's RecordFunction callbacks, the
                         # dispatcher's lookup and slow path, sizes and options of a new tensor, grad-mode
                         # and tracing state, the global context's flags, and the strings and hash tables
                         # they use; nothing of them runs an operator's loop (a PC sample is the innermost
                         # function: a kernel the dispatcher calls is a function of its own)
                         rb"|5torch8autograd8profiler|3c1010Dispatcher|3c104impl13OperatorEntry|3c1018computeDispatchKey"
                         rb"|3c1010TensorImpl|3c1013TensorOptions|2at6detail20computeStorageNbytes"
                         rb"|2at6detail22check_size_nonnegative|5torch3jit6tracer15getTracingState"
                         rb"|2at4impl22PythonTorchFunctionTLS|2at7Context|St7__cxx1112basic_string|St10_Hashtable)")
# the harness's own libraries, by the path, device and inode of the file the judge loaded them from before
# it forked (kag's operator counter, kag.core.eval.judge.op_counter_lib, in a temp folder of the judge's,
# mode 0500): their code is the observer's, as RecordFunction's bookkeeping is. A file the candidate made
# at the same path in its own /tmp is another device's or inode: not the harness's.
HARNESS_LIBRARIES: dict[str, tuple[str, int]] = {}


def add_harness_library(path: str) -> None:
    st = os.stat(path)
    HARNESS_LIBRARIES[path] = (f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}", st.st_ino)
RUNTIME_PATHS = re.compile(r"(^\[|/python\d|/bin/python|/lib-dynload/|_ctypes|/torch/_C\.|/_C\.cpython)")


@attrs.define
class Mapping:
    start: int
    end: int
    path: str
    offset: int = 0  # the file offset mapped at ``start``
    device: str = ""  # the file's, as maps shows it (major:minor, hex)
    inode: int = 0


def read_maps(pid: int) -> list[Mapping]:
    out = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            out.append(Mapping(lo, hi, parts[5].strip() if len(parts) > 5 else "", int(parts[2], 16), parts[3],
                               int(parts[4])))
    out.sort(key=lambda m: m.start)
    return out


def library_functions(path: str, pattern: "re.Pattern[bytes]") -> list[tuple[int, int]]:
    """(start, end) addresses, relative to the load base, of the functions in ``path``'s symbol
    tables (``.dynsym``, and ``.symtab`` where the library keeps one) whose (mangled) names match
    ``pattern``, and of its PLT stubs; [] when the file has no such table or cannot be read (the judge reads it: the
    candidate's Landlock does not bind it). Parsed once per file a process (600k symbols of
    libtorch_cpu in ~0.7 s)."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    return list(_library_functions(path, st.st_size, st.st_mtime_ns, pattern))


@functools.lru_cache(maxsize=8)
def _library_functions(path: str, _size: int, _mtime: int, pattern: "re.Pattern[bytes]") -> tuple[tuple[int, int], ...]:
    import struct

    from kag.core.trust.symbols import dynamic_symbols, plt_sections

    try:
        symbols = dynamic_symbols(path, full=True)
        stubs = plt_sections(path)  # a PLT stub only jumps on (one sampled honest call: 20 of 67 PyTorch samples)
    except (OSError, ValueError, struct.error):
        return ()
    return tuple(sorted({(value, value + size) for name, info, _shndx, value, size in symbols
                         if info & 0xF == 2 and size and pattern.match(name)} | set(stubs)))  # STT_FUNC


@functools.lru_cache(maxsize=1)
def trusted_prefixes() -> tuple[str, ...]:
    """Where the runtime's own files live (the interpreter, its packages, the system's libraries): code
    mapped from anywhere else is not the runtime's, whatever its file is called."""
    import sys

    roots = (sys.prefix, sys.base_prefix, "/usr", "/lib", "/lib64", "/lib32", "/opt")
    return tuple(sorted({q.rstrip("/") + "/" for p in roots for q in (p, os.path.realpath(p))}))


def category(path: str, solution_dir: str | None, strict: bool = False) -> str:
    """Which of solution, torch, foreign, runtime a mapped file's code counts as. ``strict`` (the CPU
    backend): code that is anonymous, in a memory file or a deleted one, or in a file outside the
    runtime's own folders counts as foreign, not runtime: a candidate that copied PyTorch's code into a
    memfd mapped over it (MAP_FIXED, same addresses) ran every fallback as "runtime", 8 of 8 runs passed."""
    if solution_dir and path.startswith(solution_dir.rstrip("/") + "/"):
        return "solution"
    if path in HARNESS_LIBRARIES:
        return "runtime"
    base = os.path.basename(path)
    if TORCH_LIBS.match(base) and not path.endswith("(deleted)"):
        return "torch"
    if strict:
        if path.startswith("[") and path != "[anonymous]":  # [vdso], [vsyscall]: the kernel's
            return "runtime"
        if not path or path.startswith(("/memfd:", "[")) or path.endswith("(deleted)") \
                or not path.startswith(trusted_prefixes()):
            return "foreign"
    if not path or path.startswith("[") or RUNTIME_LIBS.match(base) or RUNTIME_PATHS.search(path):
        return "runtime"
    if base.endswith(".so") or ".so." in base:
        return "foreign"
    return "runtime"


def running_pcs(pid: int, fds: dict[str, int] | None = None) -> list[int]:
    """The program counters of ``pid``'s threads that were running user code when it stopped
    (``fds`` keeps each thread's file open between samples)."""
    return [pc for _, pc in running_threads(pid, fds)]


def running_threads(pid: int, fds: dict[str, int] | None = None) -> list[tuple[str, int]]:
    """(thread id, program counter) of each of ``pid``'s threads running user code when it stopped."""
    pcs: list[tuple[str, int]] = []
    fds = {} if fds is None else fds
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return pcs
    for tid in tids:
        try:
            fd = fds.get(tid)
            if fd is None:
                fd = fds[tid] = os.open(f"/proc/{pid}/task/{tid}/syscall", os.O_RDONLY | os.O_CLOEXEC)
            fields = os.pread(fd, 512, 0).decode("ascii", "replace").split()
        except OSError:
            continue
        # "-1 sp pc", or a negative number (an interrupt's vector) in its place: stopped in user code;
        # a system call's number and arguments: blocked (or leaving) a call, idle for our purpose
        if fields and fields[0].startswith("-") and len(fields) >= 3:
            try:
                pcs.append((tid, int(fields[2], 16)))
            except ValueError:
                continue
    return pcs


def busy_lower(busy_s: float, k: int, windows: int, z: float = BUSY_Z) -> float:
    """The time a call that the candidate's threads spent in another library's code, estimated over
    ``windows`` sampled windows (``busy_s``: the sum of their estimates) from ``k`` samples of threads
    there, lowered by ``z`` standard errors of ``k`` (a Poisson count); 0 without samples."""
    if k <= 0 or windows <= 0:
        return 0.0
    return busy_s / windows * max(0.0, k - z * math.sqrt(k)) / k


def busier_than_eager(busy_s: float, k: int, windows: int, eager_s: float | None,
                      share: float = BUSY_SHARE) -> bool:
    """Enough samples, and surely more than ``share`` of eager's time a call spent in another library's
    code: an absolute count of that time, which no thread spinning in the solution's module dilutes."""
    return bool(eager_s) and k >= MIN_SAMPLES and busy_lower(busy_s, k, windows) > share * eager_s


def wilson_lower(k: int, n: int, z: float = WILSON_Z) -> float:
    """The lower end of the Wilson score interval of a share ``k / n`` (``z`` standard errors)."""
    if n <= 0:
        return 0.0
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


KINDS = ("solution", "torch", "foreign", "runtime")  # what a sample's code is (``category``, plus bookkeeping)


def not_its_own(outside: int, n: int) -> bool:
    """Enough samples, and surely more than ``FOREIGN_SHARE`` of them outside the solution's code."""
    return n >= MIN_SAMPLES and wilson_lower(outside, n) > FOREIGN_SHARE


@attrs.define
class CpuProvenance:
    """The samples of one candidate's sampled windows and what they say."""

    pid: int
    solution_dir: str | None
    gpu: bool = False  # a GPU backend: shares of every running sample, not of the computing ones
    expected_s: float = 0.001  # a call's expected time: samples are spread over it
    counts: dict[str, int] = attrs.field(factory=lambda: dict.fromkeys(KINDS, 0))
    places: dict[str, int] = attrs.field(factory=dict)  # samples per library file (the report's detail)
    threads: dict[str, dict[str, int]] = attrs.field(factory=dict)  # the counts of each thread
    windows: int = 0
    attempts: int = 0  # samples taken (running threads or not)
    # stops at which some thread ran computing code, and those at which some thread ran PyTorch's or another
    # library's: threads added beside a fallback add no such moment, whatever they run
    moments: int = 0
    moments_outside: int = 0
    # the same of each window's first stop alone: a candidate that notices a stop (a gap in its clock) and
    # turns to its own code for the rest of the window cannot have turned before this one
    firsts: int = 0
    firsts_outside: int = 0
    # per thread, [computing, outside] at each window's first stop (a thread spinning in the solution makes every
    # first stop a computing one; a later stop of the window, drawn densely, lands at a call's start: biased)
    first_threads: dict[str, list[int]] = attrs.field(factory=dict)
    # the candidate's threads' time a call in PyTorch's or another library's code (``busy_verdicts``), summed over
    # the sampled windows that took a stop: each window's threads found there a stop, times its call's time as the
    # judge's clock measured that window (less its stops); the same of each window's first stop alone
    busy_s: float = 0.0
    first_busy_s: float = 0.0
    busy_windows: int = 0
    eager_s: float | None = None  # the eager reference's time a call, as the judge timed it (``busy_verdicts``)
    _last: "WindowSampler | None" = None  # the last window's sampler: how many samples it took of those it asked for
    _scale: float = 1.0  # the delays' scale, shrunk while windows end before their samples are taken
    stop: Callable[[], None] | None = None  # the judge's stop and resume of the candidate (its bookkeeping)
    resume: Callable[[], None] | None = None
    _fds: dict[str, int] = attrs.field(factory=dict)
    _maps: list[Mapping] = attrs.field(factory=list)
    _starts: list[int] = attrs.field(factory=list)
    _book: dict[str, tuple[list[int], list[tuple[int, int]], int | None]] = attrs.field(factory=dict)

    @classmethod
    def for_process(cls, pid: int, module_dir: str | None, cand: Any = None,
                    gpu: bool = False) -> "CpuProvenance | None":
        """None where the stopped candidate's threads cannot be read here."""
        try:
            with open(f"/proc/{pid}/task/{pid}/syscall"):
                pass
        except OSError:
            return None
        prov = cls(pid=pid, solution_dir=os.path.realpath(module_dir) if module_dir else None, gpu=gpu)
        if cand is not None:
            prov.stop, prov.resume = cand.stop, cand.resume
        return prov

    def _where(self, pc: int) -> str:
        for attempt in (0, 1):
            if attempt or not self._maps:
                self._maps = read_maps(self.pid)
                self._starts = [m.start for m in self._maps]
            i = bisect_right(self._starts, pc) - 1
            if i >= 0 and self._maps[i].start <= pc < self._maps[i].end:
                m = self._maps[i]
                if m.path in HARNESS_LIBRARIES and HARNESS_LIBRARIES[m.path] != (m.device, m.inode):
                    return f"{m.path} (not the harness's file)"
                return m.path
        return ""

    def _bookkeeping(self, path: str, pc: int) -> bool:
        """Whether ``pc`` (in the library at ``path``) lies in one of its exported bookkeeping
        functions (``BOOKKEEPING``)."""
        if path not in self._book:  # once per library: the library stays where it was loaded
            funcs = library_functions(path, BOOKKEEPING)
            base = min((m.start for m in self._maps if m.path == path and m.offset == 0), default=None)
            self._book[path] = ([a for a, _ in funcs], funcs, base)
        starts, funcs, base = self._book[path]
        if base is None or not funcs:
            return False
        i = bisect_right(starts, pc - base) - 1
        return i >= 0 and funcs[i][0] <= pc - base < funcs[i][1]

    def sample(self, first: bool = False) -> int:
        """Stop the candidate, record where its running threads are, resume it; how many of them were in
        PyTorch's or another library's code. ``first``: the window's first stop, which nothing the candidate
        saw of this window can have foretold."""
        self.attempts += 1
        if self.stop is not None:
            self.stop()
        else:  # a child of this process: stopped once waitpid says so
            os.kill(self.pid, signal.SIGSTOP)
            os.waitpid(self.pid, os.WUNTRACED)
        kinds: set[str] = set()
        outside = 0
        try:
            for tid, pc in running_threads(self.pid, self._fds):
                path = self._where(pc)
                kind = category(path, self.solution_dir, strict=not self.gpu)
                name = os.path.basename(path) or "[anonymous]"
                if kind == "torch" and self._bookkeeping(path, pc):
                    kind, name = "runtime", f"{name} (bookkeeping)"
                self.counts[kind] += 1
                kinds.add(kind)
                outside += kind in OUTSIDE
                if first and kind in COMPUTING:
                    seen = self.first_threads.setdefault(tid, [0, 0])
                    seen[0] += 1
                    seen[1] += kind in OUTSIDE
                mine = self.threads.setdefault(tid, dict.fromkeys(KINDS, 0))
                mine[kind] += 1
                self.places[name] = self.places.get(name, 0) + 1
            if kinds & COMPUTING:
                self.moments += 1
                self.moments_outside += bool(kinds & OUTSIDE)
                if first:
                    self.firsts += 1
                    self.firsts_outside += bool(kinds & OUTSIDE)
        finally:
            if self.resume is not None:
                self.resume()
            else:
                os.kill(self.pid, signal.SIGCONT)
        return outside

    def window_sampler(self, calls: int = 1) -> "WindowSampler":
        """A sampler for one window of ``calls`` calls (kag.core.eval.judge.candidate_process.wait_done).
        When a window ends with under half the samples it asked for (calls quicker than
        ``expected_s`` said, a loaded machine) the next windows' gaps shrink."""
        last = self._last
        if last is not None and last.attempts < 0.5 * SAMPLES_PER_CALL * last.calls:
            self._scale = max(1 / 8, self._scale * max(last.attempts, 1) / (SAMPLES_PER_CALL * last.calls))
        self.windows += 1
        self._last = WindowSampler(self, max(self.expected_s, 2e-5), calls)
        return self._last

    def _pooled(self) -> set[str]:
        """The threads never seen in the solution's code but seen in another's: judged as one thread. A
        fallback on a fresh thread each call (or on a pool of them) gives each a sample or two, too few
        for any one verdict (138 threads, reward 1 on CI); an honest thread computes in the solution."""
        return {tid for tid, mine in self.threads.items() if not mine["solution"] and mine["torch"] + mine["foreign"]}

    def _thread_counts(self) -> list[tuple[str, dict[str, int]]]:
        """Each thread's counts and what to call it, the pooled ones (``_pooled``) summed into one."""
        pooled = self._pooled()
        groups = [("one of the candidate's threads", mine) for tid, mine in self.threads.items() if tid not in pooled]
        if len(pooled) > 1:
            groups.append((f"{len(pooled)} of the candidate's threads that never ran the solution's code",
                           {kind: sum(self.threads[tid][kind] for tid in pooled) for kind in KINDS}))
        elif pooled:
            groups.append(("one of the candidate's threads", self.threads[next(iter(pooled))]))
        return groups

    def _first_thread_counts(self) -> list[list[int]]:
        """Each thread's [computing, outside] at the windows' first stops, the pooled ones summed."""
        pooled = self._pooled()
        groups = [seen for tid, seen in self.first_threads.items() if tid not in pooled]
        mixed = [self.first_threads[tid] for tid in pooled if tid in self.first_threads]
        if mixed:
            groups.append([sum(seen[0] for seen in mixed), sum(seen[1] for seen in mixed)])
        return groups

    def enough(self) -> bool:
        """Whether the samples can tell whose code computes: ``MIN_MOMENTS`` stops found computing code,
        and each thread seen in PyTorch's or another library's code has ``MIN_THREAD_SAMPLES`` samples of
        computing code (on a loaded machine a fallback's thread had 13, beside spinning threads with
        hundreds)."""
        if self.gpu:  # its 16 windows as before: more of them not yet run on a GPU
            return True
        return self.moments >= MIN_MOMENTS and all(
            mine["solution"] + mine["torch"] + mine["foreign"] >= MIN_THREAD_SAMPLES
            for _, mine in self._thread_counts() if mine["torch"] + mine["foreign"])

    @property
    def running(self) -> int:
        return sum(self.counts.values())

    def verdicts(self) -> list[str]:
        top = sorted(self.places.items(), key=lambda kv: -kv[1])[:4]
        where = ", ".join(f"{name} {count}" for name, count in top)
        outside = self.counts["torch"] + self.counts["foreign"]
        n = self.running if self.gpu else outside + self.counts["solution"]
        if not_its_own(outside, n):
            of = "running samples" if self.gpu else "samples of computing code"
            return [f"{outside} of {n} {of} in the candidate's threads during its calls were in PyTorch's or another "
                    f"library's code ({self.counts['torch']} in PyTorch), {self.counts['solution']} in the solution's own "
                    f"module ({where}): its work is done by code that is not the solution's"]
        if self.gpu:
            return []
        # at each stop, whether any thread was in PyTorch's or another library's code: threads spinning in the
        # solution's module beside a fallback drowned it in "solution" samples (4 threads: 8931 of 9292
        # computing samples; reward 1 on the VM), and spread its own samples thin over its threads
        # (at::parallel_for's workers: 14 to 65 a thread under load, fewer on CI, where it passed)
        if not_its_own(self.moments_outside, self.moments):
            return [f"at {self.moments_outside} of the {self.moments} stops that found the candidate computing during "
                    f"its calls, one of its threads was in PyTorch's or another library's code ({self.counts['torch']} "
                    f"samples in PyTorch, {self.counts['solution']} in the solution's own module, "
                    f"{len(self.threads)} threads; {where}): its work is done by code that is not the solution's"]
        if not_its_own(self.firsts_outside, self.firsts):
            return [f"at {self.firsts_outside} of the {self.firsts} sampled windows whose first stop found the candidate "
                    f"computing, one of its threads was in PyTorch's or another library's code ({self.counts['torch']} "
                    f"samples in PyTorch, {self.counts['solution']} in the solution's own module; {where}): its work "
                    f"is done by code that is not the solution's, whatever it runs once it has seen a stop"]
        busy = self.busy_verdicts()
        if busy:
            return busy
        for n_t, out_t in sorted(self._first_thread_counts(), key=lambda c: -c[1]):  # each thread's first stops
            if not_its_own(out_t, n_t):
                return [f"{out_t} of the {n_t} sampled windows whose first stop found one of the candidate's threads "
                        f"computing found it in PyTorch's or another library's code ({where}): its work is done by "
                        f"code that is not the solution's, whatever it runs once it has seen a stop"]
        for who, mine in sorted(self._thread_counts(), key=lambda c: -(c[1]["torch"] + c[1]["foreign"])):  # each thread
            out_t = mine["torch"] + mine["foreign"]
            n_t = out_t + mine["solution"]
            if not_its_own(out_t, n_t):
                return [f"{out_t} of {n_t} samples of computing code in {who} during its calls "
                        f"were in PyTorch's or another library's code ({mine['torch']} in PyTorch), {mine['solution']} "
                        f"in the solution's own module ({len(self.threads)} threads sampled; {where}): its work is done "
                        f"by code that is not the solution's"]
        if self.windows and self.moments < MIN_SAMPLES:  # fails closed: no verdict is not a pass
            return [f"only {self.moments} of {self.attempts} stops in {self.windows} sampled windows found the candidate "
                    f"computing during its calls ({where or 'nowhere'}): too few to tell that the work is the solution's "
                    f"(its threads idle or blocked in the kernel while its calls ran)"]
        return []

    def window_done(self, window_s: float, stops: "WindowSampler") -> None:
        """A sampled window of ``window_s`` on the judge's clock has ended: its stops' count of threads in
        another library's code, as a share of its stops, times its call's time, joins ``busy_s``."""
        if stops.attempts <= 0:
            return
        per_call = max(0.0, window_s - stops.stopped_s) / stops.calls
        self.busy_s += stops.outside / stops.attempts * per_call
        self.first_busy_s += stops.first_outside * per_call
        self.busy_windows += 1

    def busy(self) -> dict[str, Any]:
        """The absolute count: the candidate's threads' time a call in PyTorch's or another library's code,
        estimated from every stop and from first stops alone (ms), and as a share of eager's time."""
        k = self.counts["torch"] + self.counts["foreign"]
        k_first = sum(seen[1] for seen in self.first_threads.values())
        n = max(self.busy_windows, 1)
        out: dict[str, Any] = {
            "outside_thread_samples": k, "first_outside_thread_samples": k_first, "busy_windows": self.busy_windows,
            "outside_ms_per_call": round(self.busy_s / n * 1e3, 6),
            "first_outside_ms_per_call": round(self.first_busy_s / n * 1e3, 6)}
        if self.eager_s:
            out["eager_ms"] = round(self.eager_s * 1e3, 6)
            out["outside_of_eager"] = round(self.busy_s / n / self.eager_s, 4)
            out["outside_of_eager_lower"] = round(busy_lower(self.busy_s, k, n) / self.eager_s, 4)
            out["first_outside_of_eager"] = round(self.first_busy_s / n / self.eager_s, 4)
            out["first_outside_of_eager_lower"] = round(busy_lower(self.first_busy_s, k_first, n) / self.eager_s, 4)
        return out

    def busy_verdicts(self) -> list[str]:
        """The absolute rule (``BUSY_SHARE``): on the CPU backend, with eager's time known, a candidate whose
        threads spent surely more than that share of eager's time a call in PyTorch's or another library's
        code, over every stop or over the windows' first stops (which a candidate that reacts to stops cannot
        have foreseen), had that code do the work, however many threads spun in its own module meanwhile."""
        if self.gpu or not self.eager_s:
            return []
        b = self.busy()
        where = ", ".join(f"{name} {count}" for name, count in sorted(self.places.items(), key=lambda kv: -kv[1])[:4])
        for label, busy_s, k in (("stops", self.busy_s, b["outside_thread_samples"]),
                                 ("windows' first stops", self.first_busy_s, b["first_outside_thread_samples"])):
            if busier_than_eager(busy_s, k, self.busy_windows, self.eager_s):
                ms = busy_s / self.busy_windows * 1e3
                return [f"its threads spent about {ms:.4g} ms a call in PyTorch's or another library's code ({k} thread "
                        f"samples at the {label} of {self.busy_windows} sampled windows; {self.counts['solution']} "
                        f"samples in the solution's own module, "
                        f"{len(self.threads)} threads; {where}), {ms / (self.eager_s * 1e3):.2f}x the eager reference's "
                        f"{self.eager_s * 1e3:.4g} ms a call, more than {BUSY_SHARE:.2f}x: its work is done by code that "
                        f"is not the solution's, whatever spins beside it"]
        return []

    def close(self) -> None:
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds.clear()

    def summary(self) -> dict[str, Any]:
        return {"windows": self.windows, "samples": self.attempts, "running_samples": self.running, **self.counts,
                "moments": self.moments, "moments_outside": self.moments_outside,
                "first_stops": self.firsts, "first_stops_outside": self.firsts_outside, "threads": len(self.threads),
                "expected_ms": round(self.expected_s * 1e3, 4), "delay_scale": round(self._scale, 4),
                "top": dict(sorted(self.places.items(), key=lambda kv: -kv[1])[:6]),
                # the raw counts each rule reads, per thread (numbered in the order first seen, not by id)
                "per_thread": [dict(mine) for mine in self.threads.values()],
                "first_per_thread": [list(seen) for seen in self.first_threads.values()],
                "pooled_threads": len(self._pooled()), **self.busy()}


class WindowSampler:
    """One window's stops: each call takes a sample when one is due and returns the time to the next.
    The first falls uniformly within the window's first call (``call_s``: a call's time, measured
    without stops), before the candidate can have seen any stop of this window (``first``); the rest
    at exponential gaps. ``stopped_s``: the time the candidate spent stopped, which the window's
    length on the judge's clock includes."""

    def __init__(self, prov: CpuProvenance, call_s: float, calls: int = 1):
        self.prov, self.call_s, self.calls = prov, call_s, max(calls, 1)
        self.mean = call_s * prov._scale / SAMPLES_PER_CALL
        self.rng = random.SystemRandom()
        self.due: float | None = None
        self.stopped_s = 0.0
        self.attempts = 0  # the samples this window has taken
        self.outside = 0  # the threads its stops found in PyTorch's or another library's code
        self.first_outside = 0  # ... at its first stop

    def __call__(self) -> float:
        now = time.perf_counter()
        if self.due is None:
            self.due = now + self.rng.uniform(0.0, self.call_s)
        elif self.attempts >= MAX_SAMPLES_PER_CALL * self.calls:  # enough of this window: its
            self.due = now + 3600.0  # cost (a stop and a read of every thread) is the evaluation's time
        elif now >= self.due:
            found = self.prov.sample(first=self.attempts == 0)
            if self.attempts == 0:
                self.first_outside = found
            self.outside += found
            self.attempts += 1
            after = time.perf_counter()
            self.stopped_s += after - now
            now, self.due = after, after + self.rng.expovariate(1.0 / self.mean)
        return max(0.0, self.due - now)
