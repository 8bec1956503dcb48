"""kag's CUPTI kernel recorder: its records summarised as the guards read them (CPU), and the
recorder itself driving the CUPTI that torch loaded (GPU; skipped without one)."""

from __future__ import annotations

import threading

import pytest

from kag.core.eval.orchestrator.guarding import RunInfo
from kag.core.eval.candidate.kernel_records import MARK, KernelRecord, Records, summarize_records
from kag.core.eval.candidate.observations import Observations
from kag.plugins.guards.hidden_work import NoHiddenWork

HARNESS, OTHER = 7001, 7002


def records(kernels: list[tuple[int, int, int, int | None]], harness_launches: int = 1) -> Records:
    """A session's records: kernels as (start, end, launching thread, call id or None); the
    harness's mark launch first, and ``harness_launches`` fills of its own outside any call."""
    rec = Records()
    corr = 1
    rec.kernels.append(KernelRecord("fill_mark", 0, 1, corr))
    rec.launch_thread[corr], rec.launch_call[corr] = HARNESS, MARK
    for _ in range(harness_launches):
        corr += 1
        rec.kernels.append(KernelRecord("harness_fill", 2, 3, corr))
        rec.launch_thread[corr] = HARNESS
    for start, end, thread, call in kernels:
        corr += 1
        rec.kernels.append(KernelRecord("relu_kernel", start, end, corr))
        rec.launch_thread[corr] = thread
        if call is not None:
            rec.launch_call[corr] = call
    return rec


def verdict(rec: Records, calls: int, call_window: list[int]) -> tuple[Observations, list[str]]:
    obs = Observations(calls=calls)
    summarize_records(rec, call_window, obs)
    return obs, [v.detail for v in NoHiddenWork().check_observations(obs, RunInfo())]


def sequential(window: int = 0, n: int = 4, first_call: int = 1, at: int = 1000) -> list[tuple[int, int, int, int | None]]:
    return [(at + 1000 * i, at + 1000 * i + 500, HARNESS, first_call + i) for i in range(n)]


def test_honest_calls_are_attributed_and_the_harness_launches_are_not_the_solutions():
    obs, found = verdict(records(sequential() + sequential(first_call=5, at=10_000), harness_launches=3), 8,
                         [1] * 4 + [2] * 4)
    assert found == [] and obs.error is None
    assert obs.kernels == {"relu_kernel": 8} and obs.windows == 2 and obs.idle_calls == 0
    assert obs.thread_launches == 0 and obs.overlapping_calls == 0


def test_a_kernel_launched_by_a_thread_of_the_solutions_is_hidden_work():
    # the calls launch nothing; a thread the solution started launches each call's work (overlap_threads)
    threaded = [(1000 * i + 600, 1000 * i + 900, OTHER, None) for i in range(4)]
    obs, found = verdict(records(threaded), 4, [1] * 4)
    assert obs.thread_launches == 4 and obs.kernels == {"relu_kernel": 4}
    assert any("launched by a thread other than" in d for d in found), found


def test_calls_that_overlap_on_the_gpu_are_counted_per_window():
    # each call's kernel starts while the previous call's still runs (two streams)
    overlapped = [(10**6 + 20_000 * i, 10**6 + 20_000 * i + 90_000, HARNESS, 1 + i) for i in range(8)]  # ns
    obs, found = verdict(records(overlapped), 8, [1] * 8)
    assert obs.overlapping_calls == 7
    assert any("started GPU work" in d for d in found), found
    # the same kernels split into windows of one call each: nothing overlaps within a window
    obs, _ = verdict(records(overlapped), 8, list(range(1, 9)))
    assert obs.overlapping_calls == 0


def test_the_profilers_events_and_the_recorders_records_give_the_same_counts():
    """One scenario both ways: two windows of four calls, the second window's calls overlapping and
    its last call idle (kernels in ns; the profiler's CPU events on the harness's thread 1)."""
    from kag.core.eval.candidate.observations import FORWARD_RANGE, HARNESS_MARK, WINDOW_RANGE
    from kag.core.eval.candidate.profiler_events import Event, summarize_events

    kernels = sequential() + [(20_000 + 1000 * i, 20_000 + 1000 * i + 5000, HARNESS, 5 + i) for i in range(3)]
    by_records, _ = verdict(records(kernels), 8, [1] * 4 + [2] * 4)

    def ev(name, start, end, cuda=False, corr=0, linked=0):
        return Event(name=name, cuda=cuda, start=start, end=end, thread=1, corr=corr, linked=linked, annotation=False)

    events = [ev(HARNESS_MARK, -10, -9), ev(WINDOW_RANGE, 0, 9_000), ev(WINDOW_RANGE, 10_000, 40_000)]
    events += [ev(FORWARD_RANGE, 100 + 1000 * i, 600 + 1000 * i) for i in range(4)]
    events += [ev(FORWARD_RANGE, 10_100 + 1000 * i, 10_600 + 1000 * i) for i in range(4)]
    for n, (start, end, _thread, call) in enumerate(kernels):
        at = (100 if call <= 4 else 10_100) + 1000 * ((call - 1) % 4) + 10
        events += [ev("cudaLaunchKernel", at, at + 5, corr=100 + n, linked=1),
                   ev("relu_kernel", start, end, cuda=True, corr=100 + n)]
    by_events = Observations(calls=8)
    summarize_events(events, by_events)
    counts = [(o.overlapping_calls, o.idle_calls, o.windows, o.uneven_windows, o.thread_launches, o.kernels)
              for o in (by_records, by_events)]
    assert counts[0] == counts[1] == (2, 1, 2, 0, 0, {"relu_kernel": 7}), counts


def test_one_call_doing_its_windows_work_is_uneven():
    lazy = [(1000, 1010, HARNESS, 1), (1020, 1030, HARNESS, 2), (1040, 1050, HARNESS, 3), (1060, 9000, HARNESS, 4)]
    obs, _ = verdict(records(lazy * 1), 4, [1] * 4)
    assert obs.windows == 1 and obs.uneven_windows == 1


def test_a_recorder_that_never_saw_the_harness_mark_is_an_error_not_a_clean_report():
    rec = records(sequential())
    rec.launch_call.pop(1)  # the mark's record missing: CUPTI switched off, or ids pushed by someone else
    obs, _ = verdict(rec, 4, [1] * 4)
    assert obs.error and "harness" in obs.error and obs.kernels == {}
    dropped = records(sequential())
    dropped.dropped = 12
    obs, _ = verdict(dropped, 4, [1] * 4)
    assert obs.error and "dropped 12" in obs.error


def test_kernel_names_are_demangled_as_the_profiler_gave_them():
    from kag.core.eval.candidate.kernel_records import demangle

    assert demangle(b"_Z11relu_kernelPKfPfi") == "relu_kernel(float const*, float*, int)"
    assert demangle(b"relu_vec4_kernel") == "relu_vec4_kernel"  # extern "C"
    assert demangle(b"_Zgarbage") == "_Zgarbage"


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
@pytest.mark.usefixtures("observer_kind")  # beside torch.profiler's CPU session, and beside kag's counter alone
def test_the_observer_records_kernels_with_its_own_recorder_on_a_gpu(monkeypatch):
    """The observer as the harness drives it (windows of calls, each call marked), then a thread of
    its own launching: every kernel a call launched is attributed to it, the thread's launch is
    one, and the profiler's session recorded the operators (CPU side) as before."""
    import torch

    from kag.core.eval.candidate.observe import CallObserver

    monkeypatch.setenv("KAG_KERNEL_RECORDER", "kag")
    x = torch.randn(1 << 20, device="cuda")
    torch.relu(x)
    torch.cuda.synchronize()
    obs_session = CallObserver("cuda")
    obs_session.start()
    assert obs_session.recorder is not None, obs_session.error
    for _ in range(3):
        with obs_session.window_range():
            for _ in range(4):
                with obs_session.call():
                    torch.relu(x)
            torch.cuda.synchronize()
    worker = threading.Thread(target=lambda: (torch.relu(x), torch.cuda.synchronize()))
    worker.start()
    worker.join()
    obs = obs_session.stop()
    assert obs.error is None, obs.error
    assert obs.calls == 12 and obs.windows == 3 and obs.idle_calls == 0 and obs.overlapping_calls == 0
    assert sum(n for name, n in obs.kernels.items() if "elementwise" in name or "relu" in name.lower()) >= 13, obs.kernels
    assert obs.thread_launches == 1
    assert obs.ops.get("aten::relu") == 13, obs.ops  # the 12 calls' and the thread's (it works for the solution)
    assert all(not name.startswith("_Z") for name in obs.kernels), obs.kernels  # demangled, as the guards read them


@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
@pytest.mark.usefixtures("observer_kind")  # beside torch.profiler's CPU session, and beside kag's counter alone
def test_calls_overlapping_on_two_streams_are_seen_by_the_recorder(monkeypatch):
    import torch

    monkeypatch.setenv("KAG_KERNEL_RECORDER", "kag")
    from kag.core.eval.candidate.observe import CallObserver

    x = torch.randn(1 << 24, device="cuda")
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    session = CallObserver("cuda")
    session.start()
    assert session.recorder is not None, session.error
    with session.window_range():
        for i in range(8):
            with session.call():
                with torch.cuda.stream(streams[i % 2]):
                    for _ in range(4):
                        torch.sin(x)
        torch.cuda.synchronize()
    obs = session.stop()
    assert obs.error is None, obs.error
    assert obs.overlapping_calls >= 2, obs
