"""kag.core.trust.provenance on the CPU: where a process's running threads are, read from outside,
and PyTorch's bookkeeping (the profiler every call runs under, allocation) told from its compute."""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch

from kag.core.trust.provenance import BOOKKEEPING, CpuProvenance, busier_than_eager, busy_lower, library_functions

LIBTORCH_CPU = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")


def test_pytorch_bookkeeping_is_found_by_name_and_size_in_its_symbol_tables():
    funcs = library_functions(LIBTORCH_CPU, BOOKKEEPING)
    assert len(funcs) > 50 and all(a < b for a, b in funcs) and funcs == sorted(funcs)
    assert library_functions(__file__, BOOKKEEPING) == []  # not ELF


def _inside(funcs: list[tuple[int, int]], address: int) -> bool:
    return any(a <= address < b for a, b in funcs)


@pytest.mark.skipif(not os.path.exists(LIBTORCH_CPU), reason="needs torch's libtorch_cpu.so")
def test_unexported_bookkeeping_kinetos_own_and_plt_stubs_count_as_bookkeeping_and_no_kernel_does():
    """An honest binding's tiny CPU call (a 64 x 256 ReLU through the CPU example) read 46 of 50
    computing samples in PyTorch, reward -1: Kineto's correlation ids (``9libkineto``: the pattern read
    ``8libkineto`` and never matched), the profiler's RecordFunction callbacks and the dispatcher's
    lookup, found only in ``.symtab``, and PLT stubs. None of PyTorch's compute is among them."""
    from kag.core.trust.symbols import dynamic_symbols, plt_sections

    funcs = library_functions(LIBTORCH_CPU, BOOKKEEPING)
    table = {name: value for name, info, _shndx, value, size in dynamic_symbols(LIBTORCH_CPU, full=True)
             if info & 0xF == 2 and size}
    kineto = {n: v for n, v in table.items() if n.startswith(b"_ZN9libkineto")}
    assert len(kineto) > 20 and [n for n, v in kineto.items() if not _inside(funcs, v)] == []
    for a, b in plt_sections(LIBTORCH_CPU):
        assert _inside(funcs, a) and _inside(funcs, b - 1)
    book = {v for n, v in table.items() if BOOKKEEPING.match(n)}  # a kernel folded into one (same code) is one
    compute = {n: v for n, v in table.items() if n.startswith((b"_ZN2at3cpu", b"_ZN2at6native", b"_ZN2at18TensorIteratorBase"))
               and not BOOKKEEPING.match(n) and v not in book}
    assert len(compute) > 1000
    assert [n for n, v in list(compute.items())[::50] if _inside(funcs, v)] == []


def _sampled(work: str, samples: int = 400) -> CpuProvenance:
    """A forked child doing ``work`` in a loop (under the observer's profiler and ranges), sampled
    from this process as the judge samples a candidate."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            from torch._C._profiler import _RecordFunctionFast
            from torch.profiler import ProfilerActivity, profile

            torch.set_grad_enabled(False)
            torch.set_num_threads(1)  # the samples land in the kernel, not in OpenMP's idle workers
            small, big = torch.randn(4, 64), torch.randn(512, 4096)
            with profile(activities=[ProfilerActivity.CPU]):
                os.write(ready_w, b"1")
                while True:
                    with _RecordFunctionFast("kag::forward"):
                        if work == "allocate":
                            torch.empty_like(small)
                        else:
                            torch.relu(big)
        finally:
            os._exit(0)
    os.read(ready_r, 1)
    time.sleep(0.3)
    prov = CpuProvenance(pid=pid, solution_dir=None)
    try:
        for _ in range(samples):
            prov.sample()
            time.sleep(0.002)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        prov.close()
    return prov


@pytest.mark.skipif(not os.path.exists(LIBTORCH_CPU), reason="needs torch's libtorch_cpu.so")
def test_allocation_under_the_profiler_is_bookkeeping_and_pytorchs_compute_is_not():
    """A tiny honest call's PyTorch samples were mostly the harness's profiler and the binding's
    empty_like (``ThreadLocalSubqueue::begin_op`` alone 322 of 573 for a 4 x 64 ReLU): counted as
    PyTorch's compute, they failed an honest kernel. PyTorch's own ReLU stays PyTorch's."""
    allocating = _sampled("allocate")
    book = sum(n for name, n in allocating.places.items() if name.endswith("(bookkeeping)"))
    # the rest: unexported wrappers (81 of them to 61 bookkeeping samples in one run of the whole suite)
    assert book >= 20 and book > 0.5 * allocating.counts["torch"], (allocating.counts, allocating.places)
    computing = _sampled("relu")
    book = sum(n for name, n in computing.places.items() if name.endswith("(bookkeeping)"))
    assert computing.counts["torch"] >= 20 and computing.counts["torch"] > 5 * book, (computing.counts,
                                                                                      computing.places)


def test_threads_spinning_in_the_solution_do_not_drown_a_fallback_in_another():
    """The aggregate share can be diluted (four threads spinning in the solution's module beside
    at::cpu::clamp_min: 8931 of 9292 computing samples were the solution's, reward 1); each thread is
    judged on its own too, and honest threads that all compute in the solution pass."""
    def prov(threads: dict[str, dict[str, int]]) -> CpuProvenance:
        p = CpuProvenance(pid=0, solution_dir=None)
        p.threads = threads
        for mine in threads.values():
            for kind, n in mine.items():
                p.counts[kind] += n
        return p

    spin = {"solution": 3000, "torch": 0, "foreign": 0, "runtime": 10}
    caller = {"solution": 2, "torch": 90, "foreign": 0, "runtime": 20}
    diluted = prov({"1": caller, "2": dict(spin), "3": dict(spin), "4": dict(spin)})
    assert diluted.counts["torch"] < 0.01 * diluted.counts["solution"]
    found = diluted.verdicts()
    assert found and "90 of 92 samples of computing code in one of the candidate's threads" in found[0]
    honest = prov({"1": {"solution": 40, "torch": 12, "foreign": 0, "runtime": 30},  # allocation, dispatch
                   "2": {"solution": 60, "torch": 0, "foreign": 0, "runtime": 1}})
    assert honest.verdicts() == []
    few = prov({"1": {"solution": 0, "torch": 5, "foreign": 0, "runtime": 0}, "2": dict(spin)})
    few.moments = 60
    assert few.verdicts() == []  # too few samples in the one thread to say ...
    assert not few.enough()  # ... so the judge samples more windows
    few.threads["1"]["torch"] = 30
    assert few.enough() and few.verdicts()


def test_a_fallback_on_a_fresh_thread_each_call_is_judged_as_one_thread():
    """at::cpu::clamp_min on a new thread per call beside four spinning threads gave each of 138 threads a
    sample or two (reward 1 on CI): the threads that never ran the solution's code are judged together."""
    hopping = {f"h{i}": {"solution": 0, "torch": 2, "foreign": 0, "runtime": 1} for i in range(100)}
    hopping.update({f"s{i}": {"solution": 6000, "torch": 0, "foreign": 0, "runtime": 0} for i in range(4)})
    hopped = _counted(moments=6000, outside=190, firsts=270, firsts_outside=36, threads=hopping)
    assert hopped.enough()  # the pooled threads have their samples: no more windows needed
    found = hopped.verdicts()
    assert found and "200 of 200 samples of computing code in 100 of the candidate's threads that never ran" in found[0]
    # honest: threads made per call that compute in the solution, and a caller with a little dispatch
    honest = {f"h{i}": {"solution": 3, "torch": 0, "foreign": 0, "runtime": 1} for i in range(100)}
    honest["main"] = {"solution": 40, "torch": 12, "foreign": 0, "runtime": 30}
    assert _counted(moments=400, outside=12, firsts=128, firsts_outside=4, threads=honest).verdicts() == []
    one = _counted(moments=400, outside=2, threads={"a": {"solution": 0, "torch": 2, "foreign": 0, "runtime": 0},
                                                    "main": {"solution": 300, "torch": 0, "foreign": 0, "runtime": 3}})
    assert one.verdicts() == []  # a thread or two of PyTorch's samples is not a verdict


def _counted(moments: int, outside: int, firsts: int = 0, firsts_outside: int = 0, windows: int = 128,
             threads: dict[str, dict[str, int]] | None = None) -> CpuProvenance:
    p = CpuProvenance(pid=0, solution_dir=None)
    p.moments, p.moments_outside, p.firsts, p.firsts_outside, p.windows = moments, outside, firsts, firsts_outside, windows
    p.threads = threads or {}
    for mine in p.threads.values():
        for kind, n in mine.items():
            p.counts[kind] += n
    return p


def test_a_fallback_spread_over_many_threads_is_seen_at_the_moments_they_run():
    """at::parallel_for on 16 cores gives each worker a sixteenth of the samples, too few for any one
    thread's verdict; at most stops some thread was in PyTorch, which spinning threads cannot hide."""
    workers = {str(i): {"solution": 0, "torch": 4, "foreign": 0, "runtime": 0} for i in range(16)}
    workers.update({f"s{i}": {"solution": 400, "torch": 0, "foreign": 0, "runtime": 0} for i in range(4)})
    spread = _counted(moments=70, outside=60, threads=workers)
    found = spread.verdicts()
    assert found and "at 60 of the 70 stops" in found[0]
    honest = _counted(moments=400, outside=60, threads={"1": {"solution": 300, "torch": 60, "foreign": 0, "runtime": 9}})
    assert honest.verdicts() == []


def test_the_first_stop_of_each_window_judges_a_candidate_that_reacts_to_stops():
    """A candidate that notices a stop and runs its own code for the rest of the window leaves most
    samples in the solution; the windows' first stops, which it cannot have foreseen, are PyTorch's."""
    thread = {"1": {"solution": 900, "torch": 100, "foreign": 0, "runtime": 0}}
    reacting = _counted(moments=1000, outside=100, firsts=100, firsts_outside=90, threads=thread)
    found = reacting.verdicts()
    assert found and "at 90 of the 100 sampled windows whose first stop" in found[0]
    assert _counted(moments=1000, outside=100, firsts=100, firsts_outside=20, threads=thread).verdicts() == []
    # a watcher thread spinning in the solution makes every first stop a computing one: the calling thread's
    # own first stops still say where the call was
    watched = _counted(moments=1000, outside=100, firsts=128, firsts_outside=40, threads=thread)
    watched.first_threads = {"1": [40, 36], "2": [128, 0]}
    found = watched.verdicts()
    assert found and "36 of the 40 sampled windows whose first stop found one of the candidate's threads" in found[0]


def test_no_verdict_for_want_of_samples_is_a_failure_once_windows_were_sampled():
    idle = _counted(moments=3, outside=0, windows=384)
    found = idle.verdicts()
    assert found and "too few to tell" in found[0]
    assert _counted(moments=0, outside=0, windows=0).verdicts() == []  # nothing sampled (no timing ran)


def test_code_outside_the_runtimes_own_files_is_not_the_runtime_on_the_cpu():
    """PyTorch's code copied into a memfd and mapped over itself ran every fallback as "runtime" (a helper's
    attack, 8 of 8 runs passed): on the CPU such code, anonymous code and code in files outside the
    runtime's folders are foreign; the real runtime stays the runtime, the solution the solution."""
    import sys

    from kag.core.trust.provenance import category

    libc = next(p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6",
                            "/lib64/libc.so.6") if os.path.exists(p))
    for hidden in ("/memfd:libc10_code (deleted)", "", "[anonymous]", "/tmp/x/libc10.so", f"{LIBTORCH_CPU} (deleted)",
                   "/tmp/kag-evals-0/cand/libpython3.11.so.1.0"):
        assert category(hidden, "/cache/sol", strict=True) == "foreign", hidden
        assert category(hidden, "/cache/sol") in ("runtime", "foreign")  # a GPU backend: as before
    assert category(libc, "/cache/sol", strict=True) == "runtime"
    assert category("[vdso]", "/cache/sol", strict=True) == "runtime"
    assert category(os.path.realpath(sys.executable), "/cache/sol", strict=True) == "runtime"
    assert category(LIBTORCH_CPU, "/cache/sol", strict=True) == "torch"
    assert category("/cache/sol/cuda_extension.so", "/cache/sol", strict=True) == "solution"


def _busy(attempts: int, expected_ms: float, eager_ms: float, threads: dict[str, dict[str, int]],
          moments: int, outside: int, firsts: int, firsts_outside: int, first_threads: dict[str, list[int]],
          first_attempts: int) -> CpuProvenance:
    """A provenance with the counts one evaluation recorded (``observed["cpu_samples"]``), a call's expected
    time the same at every stop."""
    p = _counted(moments=moments, outside=outside, firsts=firsts, firsts_outside=firsts_outside, threads=threads)
    p.attempts, p.first_threads, p.busy_windows = attempts, first_threads, first_attempts
    p.expected_s, p.eager_s = expected_ms / 1e3, eager_ms / 1e3
    k = p.counts["torch"] + p.counts["foreign"]
    p.busy_s = k / attempts * p.expected_s * first_attempts  # each window's share of stops times its call's time
    p.first_busy_s = sum(seen[1] for seen in first_threads.values()) * p.expected_s
    return p


def test_pytorchs_time_a_call_against_eagers_is_not_diluted_by_spinning_threads():
    """rotate_spinners_cpp as recorded on the VM where PyTorch's worker threads did not show apart: its
    threads all ran the solution's code most of the time, every share under half, yet they spent 0.22 ms a
    call in PyTorch's code, 0.28x eager's 0.78 ms (an earlier estimate, from each stop's expected call time; the
    window-timed one read 1.9x); honest examples spent at most 0.0063x."""
    spin = {f"s{i}": {"solution": 4100, "torch": 16, "foreign": 0, "runtime": 5} for i in range(4)}
    spin["main"] = {"solution": 4277, "torch": 2, "foreign": 0, "runtime": 40}
    rotate = _busy(attempts=4392, expected_ms=15.96, eager_ms=0.7809, threads=spin, moments=4313, outside=63,
                   firsts=216, firsts_outside=10, first_threads={"s0": [200, 4], "s1": [200, 3], "s2": [200, 2],
                                                                   "s3": [200, 1], "main": [216, 0]},
                   first_attempts=250)
    found = rotate.verdicts()
    assert found and "a call in PyTorch's or another library's code (66 thread samples at the stops of 250" in found[0]
    assert rotate.busy()["outside_of_eager"] > 0.28
    rotate.eager_s = None  # untimed (no eager time): the shares alone, which it passes
    assert rotate.verdicts() == []
    # honest example_sigmoid: one sample of PyTorch's code in 781 stops
    honest = _busy(attempts=781, expected_ms=12.12, eager_ms=3.7245, moments=600, outside=1, firsts=63,
                   firsts_outside=0, first_attempts=64, first_threads={"main": [63, 0]},
                   threads={"main": {"solution": 500, "torch": 1, "foreign": 0, "runtime": 100},
                            "w": {"solution": 296, "torch": 0, "foreign": 0, "runtime": 20}})
    assert honest.verdicts() == [] and honest.busy()["outside_of_eager"] < 0.01
    # a handful of samples is no verdict, however long a call is
    few = _busy(attempts=100, expected_ms=100.0, eager_ms=0.1, moments=100, outside=5, firsts=10, firsts_outside=0,
                first_attempts=10, first_threads={}, threads={"main": {"solution": 95, "torch": 5, "foreign": 0,
                                                                         "runtime": 0}})
    assert few.busy_verdicts() == []


def test_the_absolute_count_reads_first_stops_alone_too():
    """A candidate that turns to its own code once it sees a stop leaves PyTorch's time at first stops only."""
    reacting = _busy(attempts=8000, expected_ms=5.0, eager_ms=1.0, moments=7900, outside=40, firsts=200,
                     firsts_outside=40, first_attempts=200, first_threads={"main": [200, 40]},
                     threads={"main": {"solution": 1860, "torch": 40, "foreign": 0, "runtime": 10},
                              "s": {"solution": 1900, "torch": 0, "foreign": 0, "runtime": 0}})
    reacting.first_threads = {"main": [200, 40], "s": [200, 0]}
    reacting.firsts_outside = 40
    assert busier_than_eager(reacting.first_busy_s, 40, 200, reacting.eager_s)
    assert not busier_than_eager(reacting.busy_s, 40, 200, reacting.eager_s)  # 0.025 ms a call over every stop
    found = reacting.busy_verdicts()
    assert found and "at the windows' first stops of 200 sampled windows" in found[0]


def test_the_busy_bound_is_lowered_by_the_counts_noise():
    assert busy_lower(0.0, 0, 100) == 0.0
    assert busy_lower(9 * 0.01, 9, 100) == 0.0  # 9 - 3 * 3 = 0
    assert abs(busy_lower(100 * 0.01, 100, 1000) - 0.01 * 70 / 1000) < 1e-12


def test_each_windows_share_of_stops_is_read_against_its_own_call_time():
    """A window's stops give the share of its time its threads were in another library's code; its call time
    is the judge's clock's (less the stops), not the expected time the stops were spread over."""
    from kag.core.trust.provenance import WindowSampler

    p = CpuProvenance(pid=0, solution_dir=None)
    w = WindowSampler(p, 0.001, calls=4)
    w.attempts, w.outside, w.first_outside, w.stopped_s = 20, 10, 1, 0.002
    p.window_done(0.010, w)  # 8 ms of calls, 2 ms a call: half of each stop's threads
    assert abs(p.busy_s - 0.5 * 0.002) < 1e-12 and abs(p.first_busy_s - 0.002) < 1e-12 and p.busy_windows == 1
    p.window_done(0.010, WindowSampler(p, 0.001, calls=4))  # no stop taken: no estimate
    assert p.busy_windows == 1
