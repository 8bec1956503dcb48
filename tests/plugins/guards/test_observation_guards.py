"""Guards that judge what the candidate's calls did: a real profiler (kag.core.eval.candidate.observe) around a
small module's calls on the CPU, then each guard's ``check_observations`` as the judge runs it."""

from __future__ import annotations

import time

import pytest
import torch

from kag.core.eval.candidate.checks import compare_identities, count_poison, poison_allocator, snapshot_identities
from kag.core.eval.orchestrator.guarding import RunInfo, run_observation_guards
from kag.core.eval.candidate.observe import CallObserver
from kag.core.eval.candidate.observations import Observations
from kag.plugins.guards.precision import PrecisionPolicy
from kag.plugins.guards.provenance import KernelProvenance, classify_kernels
from kag.plugins.guards.tampering import NoTampering
from kag.plugin import ALLOWED_OPS
from kag.plugins.guards.torch_fallback import NoTorchFallback

X = torch.randn(64, 32)
pytestmark = pytest.mark.usefixtures("observer_kind")  # every test under torch.profiler and kag's counter


def observe(fn, calls: int = 2, outside=None) -> Observations:
    """``fn`` called ``calls`` times inside forward ranges, ``outside`` once between them."""
    obs = CallObserver("cpu")
    obs.start()
    with torch.no_grad():
        for _ in range(calls):
            with obs.call():
                fn()
            if outside is not None:
                outside()
    return obs.stop()


def fallback(fn) -> list[str]:
    return [v.detail for v in NoTorchFallback().check_observations(observe(fn), RunInfo())]


def test_observer_counts_ops_inside_forward_only():
    obs = observe(lambda: torch.relu(X), calls=3, outside=lambda: X + 1)  # the harness's own ops don't count
    assert obs.calls == 3 and obs.error is None
    assert obs.ops.get("aten::relu") == 3, obs.ops
    assert "aten::add" not in obs.ops


def test_fallback_allows_allocation_fills_views_and_noop_contiguous():
    def f():
        a = torch.empty_like(X); b = torch.zeros(4, 4); torch.ones_like(X); b.fill_(2.0); a.zero_()  # noqa: E702
        X.view(-1).reshape(X.shape).t().transpose(0, 1).unsqueeze(0).squeeze(0)
        X[1:3].contiguous().t().t().contiguous()  # already contiguous: no copy
        return X.expand(2, *X.shape)[0].detach().narrow(0, 0, 2).as_strided((2,), (1,))

    assert fallback(f) == []


@pytest.mark.parametrize("fn,op", [
    (lambda: X.t().contiguous(), "aten::clone"),  # contiguous that copies
    (lambda: X.t().reshape(-1), "aten::clone"),  # reshape that is not a view
    (lambda: X.to(torch.float64), "aten::_to_copy"),
    (lambda: torch.ops.aten.relu.default(X), "aten::relu"),
    (lambda: torch.nn.functional.gelu(X), "aten::gelu"),
    (lambda: X @ X.t(), "aten::mm"),
    (lambda: X.sum().item(), "aten::sum"),
])
def test_fallback_flags_compute(fn, op):
    found = fallback(fn)
    assert any(op in d for d in found), found


def test_fallback_counts_every_call_and_reports_an_observer_failure():
    obs = Observations(calls=100, ops={"aten::relu": 40, "aten::empty_like": 100})
    found = NoTorchFallback().check_observations(obs, RunInfo())
    assert len(found) == 1 and "40 calls over 100" in found[0].detail
    broken = NoTorchFallback().check_observations(Observations(error="the profiler failed: X"), RunInfo())
    assert broken and "could not be observed" in broken[0].detail


def test_allow_list_is_explicit():
    for op in ("empty", "empty_like", "empty_strided", "zeros", "fill_", "view", "permute", "as_strided",
               "transpose", "unsqueeze", "squeeze", "expand", "select", "slice", "t", "detach", "alias"):
        assert op in ALLOWED_OPS
    for op in ("clone", "copy_", "add", "mul", "relu", "mm", "addmm", "convolution", "_to_copy", "linear",
               "_local_scalar_dense", "sum"):
        assert op not in ALLOWED_OPS


@pytest.mark.slow
def test_the_observer_spares_compiled_calls_the_python_markers_and_still_sees_compile():
    """Under the observer torch's Python-level profiler markers are off (a compiled baseline read
    twice its unobserved time with them on a GPU host), and torch.compile is still flagged by its
    C-level region markers; the flag is back on for the profiler's own stop."""
    import torch.autograd.profiler as autograd_profiler

    compiled = torch.compile(lambda t: t * 2 + 1, backend="eager")
    compiled(X)
    seen = []
    obs = CallObserver("cpu")
    obs.start()
    with torch.no_grad(), obs.call():
        seen.append(autograd_profiler._is_profiler_enabled)
        compiled(X)
    found = obs.stop()
    assert seen == [False]
    assert any("Torch-Compiled Region" in m for m in found.compiled), found.compiled
    assert not autograd_profiler._is_profiler_enabled  # the profiler stopped as usual


def test_fallback_flags_torch_compile():
    compiled = torch.compile(lambda t: t * 2 + 1, backend="eager")
    compiled(X)
    found = fallback(lambda: compiled(X))
    assert any("torch.compile" in d for d in found), found


def test_provenance_judges_kernels_by_name(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cu").write_text("__global__ void my_relu(float* x) {}\n")
    obs = Observations(calls=3, kernels={"my_relu(float*)": 3, "void at::native::vectorized_elementwise_kernel<4>": 3,
                                         "Memset (Device)": 1})
    found = KernelProvenance().check_observations(obs, RunInfo(device="cuda", solution_dir=str(tmp_path)))
    assert [v.guard for v in found] == ["kernel-provenance"] and "vectorized_elementwise_kernel" in found[0].detail
    assert KernelProvenance().check_observations(obs, RunInfo(device="cpu")) == []
    assert classify_kernels({"ampere_sgemm_128x64_nn"}, set(), True, True) == []
    assert classify_kernels({"ampere_sgemm_128x64_nn"}, set(), False, True) == ["ampere_sgemm_128x64_nn"]


def test_tampering_reports_what_was_replaced():
    snap = snapshot_identities()  # as the candidate does before importing model_new
    original = time.perf_counter
    time.perf_counter = lambda: 0.0
    try:
        replaced = sorted({v.detail.split(" ", 1)[0] for v in compare_identities(snap)})
    finally:
        time.perf_counter = original
    assert "time.perf_counter" in replaced
    found = NoTampering().check_observations(Observations(replaced=replaced), RunInfo())
    assert any("time.perf_counter" in v.guard + v.detail for v in found)
    assert compare_identities(snap) == []


def test_tampering_flags_new_tensor_method():
    snap = snapshot_identities()
    torch.Tensor.kag_test_evil = lambda self: self
    try:
        found = compare_identities(snap)
    finally:
        del torch.Tensor.kag_test_evil
    assert any("kag_test_evil" in v.detail for v in found)


def test_poison_pattern_is_found_in_unwritten_memory():
    t = torch.empty(1000, dtype=torch.float32)
    t.view(torch.int32).fill_(0x7FC0DEAD)
    assert count_poison(t) == 1000
    assert count_poison(torch.full((10,), float("nan"))) == 0  # a computed NaN is not the poison
    poison_allocator([t])  # runs on every size/dtype without error
    poison_allocator([torch.empty(3, dtype=torch.float16), torch.empty(2, dtype=torch.float64)])


def test_guard_options_are_validated():
    with pytest.raises(ValueError, match="tolerance"):
        PrecisionPolicy(tolerance="loose")
    with pytest.raises(TypeError):
        NoTampering(colour="red")


def test_run_observation_guards_collects_every_guard_and_passes_honest_calls():
    guards = [NoTorchFallback(), KernelProvenance(), NoTampering(), PrecisionPolicy(tolerance="strict")]
    honest = observe(lambda: torch.empty_like(X))
    assert run_observation_guards(guards, honest, RunInfo()) == []
    bad = Observations(calls=1, ops={"aten::mm": 1}, replaced=["torch.cuda.synchronize"])
    assert {v.guard for v in run_observation_guards(guards, bad, RunInfo())} == {"no-torch-fallback", "no-tampering"}


def test_ops_on_a_thread_the_solution_starts_are_its_own_even_after_forward_returns():
    """A background thread that computes with PyTorch after forward returned (the background_thread
    attack): its ops are attributed, whenever they run."""
    import threading

    threads = []
    obs = observe(lambda: threads.append(threading.Thread(target=lambda: torch.relu(X))) or threads[-1].start(),
                  calls=1, outside=lambda: [t.join() for t in threads])
    assert any(name in obs.ops for name in ("aten::relu", "aten::clamp_min")), obs.ops


def test_a_session_without_forward_calls_still_knows_the_harness_thread():
    """The windows and the hand-overs mark the harness's thread too: what the harness does between
    them in a session with no forward call (loading weights) is not the solution's, while a thread
    the solution started still is."""
    import threading

    obs = CallObserver("cpu")
    obs.start()
    with torch.no_grad():
        with obs.window_range():
            torch.relu(X)  # the harness's, around a window (no call in it)
        X.mul(2.0)  # the harness between calls (e.g. load_state_dict)
        with obs.post_range():
            pass
        worker = threading.Thread(target=lambda: torch.tanh(X))
        worker.start()
        worker.join()
    found = obs.stop()
    assert found.calls == 0 and "aten::relu" not in found.ops and "aten::mul" not in found.ops, found.ops
    assert "aten::tanh" in found.ops, found.ops


def test_a_solution_thread_that_marks_itself_as_the_harness_is_still_seen_during_forward():
    """The attack on the harness-thread rule: a thread the solution starts opens the harness's
    own ranges (``kag::window``, ``kag::post``, a short ``kag::forward`` nested in the call's)
    to pass as the harness, then computes while forward runs. Operators that start inside a
    forward range count, whatever their thread and whatever ranges were opened inside it."""
    import threading

    from torch.autograd.profiler import record_function

    go, done = threading.Event(), threading.Event()

    def spoof() -> None:
        go.wait()
        for name in ("kag::window", "kag::post", "kag::forward"):
            with record_function(name):
                pass
        torch.tanh(X)
        done.set()

    obs = CallObserver("cpu")
    obs.start()
    worker = threading.Thread(target=spoof)
    worker.start()
    with torch.no_grad(), obs.call():
        go.set()
        done.wait()
    worker.join()
    found = obs.stop()
    assert "aten::tanh" in found.ops, found.ops


def test_a_range_named_like_forward_inside_forward_does_not_end_it():
    """The same attack on the harness's own thread: forward opens a short ``kag::forward`` of its
    own, then falls back to PyTorch after it."""
    from torch.autograd.profiler import record_function

    def forward() -> None:
        with record_function("kag::forward"):
            pass
        torch.relu(X)

    assert "aten::relu" in observe(forward).ops or "aten::clamp_min" in observe(forward).ops


def test_a_kernel_launched_by_a_thread_of_the_solutions_is_hidden_work():
    """Kineto's records as an H100 gave them (bench/results/2026-11-26-63829ef-h100-h200): the calling
    thread's ranges and launches on thread 1, a std::thread's launch on thread 2 with no range open.
    Its launch lies in no call, so no call is charged with it (tests/adversarial overlap_threads
    read 0.76x eager and got reward 1)."""
    from kag.core.eval.candidate.observations import FORWARD_RANGE, HARNESS_MARK, WINDOW_RANGE
    from kag.core.eval.candidate.profiler_events import Event, summarize_events
    from kag.plugins.guards.hidden_work import NoHiddenWork

    def ev(name, start, end, thread=1, cuda=False, corr=0, linked=0):
        return Event(name=name, cuda=cuda, start=start, end=end, thread=thread, corr=corr, linked=linked,
                     annotation=False)

    window = [ev(HARNESS_MARK, -1000, -999), ev(WINDOW_RANGE, 0, 1000, corr=1)]
    window += [ev(FORWARD_RANGE, 100 * i, 100 * i + 50, corr=2 + i) for i in range(4)]
    # (one such launch in a run is noise: Kineto left one honest launch unlinked on an H200)
    honest = window + sum(([ev("cudaLaunchKernel", 100 * i + 10, 100 * i + 12, corr=50 + i, linked=2 + i),
                            ev("relu_kernel", 100 * i + 20, 100 * i + 40, cuda=True, corr=50 + i)] for i in range(4)), [])
    threaded = window + sum(([ev("cudaLaunchKernel", 100 * i + 60, 100 * i + 62, thread=2, corr=50 + i, linked=900),
                              ev("relu_kernel", 100 * i + 70, 100 * i + 90, cuda=True, corr=50 + i)] for i in range(4)), [])
    # a thread that never opened a range: Kineto gives its launches the harness's thread id, linked to nothing
    unnamed = window + sum(([ev("cudaLaunchKernel", 100 * i + 60, 100 * i + 62, corr=50 + i),
                             ev("relu_kernel", 100 * i + 70, 100 * i + 90, cuda=True, corr=50 + i)] for i in range(4)), [])
    # ModelNew's construction on the harness's thread, before any window: linked to nothing, and fine
    construction = [ev("cudaLaunchKernel", -500, -490, corr=40), ev("fill_kernel", -480, -470, cuda=True, corr=40)]
    verdicts = []
    for events in (honest + construction, threaded, unnamed):
        obs = Observations(calls=4)
        summarize_events(events, obs)
        verdicts.append((obs.thread_launches, [v.detail for v in NoHiddenWork().check_observations(obs, RunInfo())]))
    assert verdicts[0] == (0, [])
    for got in verdicts[1:]:
        assert got[0] == 4 and any("launched by a thread other than" in d for d in got[1]), got
    once = Observations(calls=4)
    summarize_events(honest + [ev("cudaLaunchKernel", 455, 456, corr=99), ev("k", 460, 470, cuda=True, corr=99)], once)
    assert once.thread_launches == 1 and NoHiddenWork().check_observations(once, RunInfo()) == []


def test_a_solution_thread_that_opens_the_harness_ranges_does_not_join_the_harness():
    """The thread rule knew the harness's threads by the names of their ranges: a thread of the
    solution's that opens ``kag::window``/``kag::post`` and launches inside them passed as the
    harness, so its launches were nobody's. The harness is now the thread of the session's first
    mark, opened before any solution code could run in that session."""
    from kag.core.eval.candidate.observations import FORWARD_RANGE, HARNESS_MARK, POST_RANGE, WINDOW_RANGE
    from kag.core.eval.candidate.profiler_events import Event, summarize_events
    from kag.plugins.guards.hidden_work import NoHiddenWork

    def ev(name, start, end, thread=1, cuda=False, corr=0, linked=0):
        return Event(name=name, cuda=cuda, start=start, end=end, thread=thread, corr=corr, linked=linked,
                     annotation=False)

    harness = [ev(HARNESS_MARK, -1000, -999), ev(WINDOW_RANGE, 0, 1000, corr=1)]
    harness += [ev(FORWARD_RANGE, 100 * i, 100 * i + 50, corr=2 + i) for i in range(4)]
    spoof = [ev(HARNESS_MARK, -900, -899, thread=2), ev(POST_RANGE, 50, 990, thread=2, corr=30)]
    spoof += sum(([ev("cudaLaunchKernel", 100 * i + 60, 100 * i + 62, thread=2, corr=50 + i, linked=30),
                   ev("relu_kernel", 100 * i + 70, 100 * i + 90, cuda=True, corr=50 + i)] for i in range(4)), [])
    obs = Observations(calls=4)
    summarize_events(harness + spoof, obs)
    assert obs.thread_launches == 4 and obs.kernels == {"relu_kernel": 4}, obs
    assert any("launched by a thread other than" in v.detail for v in NoHiddenWork().check_observations(obs, RunInfo()))


def test_a_profiler_blinded_from_inside_a_call_is_an_error_not_a_clean_report():
    """Clearing RecordFunction's callbacks (``at::clearCallbacks()`` from C++, here through torch's
    binding of it) inside the first call hides every later operator and range: the harness counts
    its own calls, so a report that saw fewer of them is an error, and the fallback guard fails it."""
    from kag.plugins.guards.torch_fallback import NoTorchFallback

    obs = CallObserver("cpu")
    obs.start()
    with torch.no_grad():
        for i in range(3):
            with obs.call():
                if i == 0:
                    torch._C._autograd._clear_callbacks()
                torch.relu(X)
    found = obs.stop()
    assert found.error and "of the 3 calls of forward" in found.error, found
    assert any("could not be observed" in v.detail for v in NoTorchFallback().check_observations(found, RunInfo()))


def test_a_profiler_session_prints_nothing_on_stderr(capfd):
    """Kineto writes ``USDT: ... profiler_start`` / ``profiler_stop`` to stderr for every session, whatever
    its log level: the runner's sessions printed 24 lines into ``kag run``'s output. Not any more."""
    import sys

    obs = CallObserver("cpu")
    obs.start()
    with obs.call():
        torch.ones(4).relu()
    obs.stop()
    print("after the session", file=sys.stderr)  # stderr still works afterwards
    err = capfd.readouterr().err
    assert "USDT" not in err and "profiler_st" not in err and "after the session" in err
