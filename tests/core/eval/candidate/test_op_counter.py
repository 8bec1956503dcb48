"""kag's operator counter (kag.core.eval.judge.op_counter_lib, kag.core.eval.candidate.op_counter): built,
signed and loaded as the judge does it, what it counts, and what a solution that drives it itself gets."""

from __future__ import annotations

import ctypes
import threading

import pytest
import torch

from kag.core.eval.candidate.observe import CallObserver
from kag.core.eval.judge import op_counter_lib
from kag.core.trust import integrity, provenance

X = torch.randn(64, 32)


@pytest.fixture
def counting(op_counter_store, tmp_path, monkeypatch):
    """A copy of the counter of this test's own (a process's copy counts what was driven out of order
    for good, as a candidate's does)."""
    from kag.core.eval.candidate import op_counter

    lib, how = op_counter_lib.load(op_counter_store, tmp_path)
    assert lib is not None, how
    monkeypatch.setattr(op_counter, "LOADED", lib)
    return lib


def observed(body, calls: int = 3):
    obs = CallObserver("cpu")
    obs.start()
    assert obs.counter is not None, obs.error
    with torch.no_grad():
        for i in range(calls):
            with obs.call():
                body(i)
    return obs.stop()


def test_counts_inside_calls_on_other_threads_and_in_the_hand_over_not_the_harness_s_own(counting):
    obs = CallObserver("cpu")
    obs.start()
    with torch.no_grad():
        for _ in range(3):
            with obs.call():
                torch.relu(X)
            torch.tanh(X)  # the harness's, between calls
        worker = threading.Thread(target=lambda: torch.sigmoid(X))  # works for the solution, whenever it runs
        worker.start()
        worker.join()
        with obs.post_range():
            torch.exp(X)
        obs.enter_null()
        torch.cos(X)  # (nothing runs in a null call; the harness's own work there is not a call's)
        obs.exit_null()
    found = obs.stop()
    assert found.error is None and found.operators == "counter"
    assert found.ops.get("aten::relu") == 3 and found.ops.get("aten::sigmoid") == 1, found.ops
    assert "aten::tanh" not in found.ops and "aten::cos" not in found.ops
    assert found.post_ops == {"aten::exp": 1}


def test_the_store_refuses_a_library_swapped_after_it_was_signed(tmp_path):
    data, how = op_counter_lib.library_bytes(tmp_path)
    assert data is not None and how == "compiled", how
    name = op_counter_lib.library_name()
    (tmp_path / f"{name}.so").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit of a forged library
    again, how = op_counter_lib.library_bytes(tmp_path)
    assert how == "compiled" and again == data  # rebuilt, not believed
    assert integrity.verify(integrity.load_key(tmp_path), op_counter_lib.KIND, name, again,
                            (tmp_path / f"{name}.so{integrity.MAC_SUFFIX}").read_text())


def _entry(lib, name: str):
    """What a solution gets by looking the loaded library up itself (ctypes, as a binding's dlsym would)."""
    fn = getattr(ctypes.CDLL(lib._name), name)
    return fn


@pytest.mark.parametrize("attack", ["end the call", "begin a null call", "hand-over state", "restart", "stop",
                                    "end, then a null call", "start from a thread"])
def test_a_solution_driving_the_counter_itself_is_an_error_not_a_clean_report(counting, attack):
    """Attack (static guards off): forward reaches the counter's own entry points and switches its call's
    operators out of view before falling back to PyTorch. Each way leaves the calls' marks uneven."""
    def body(i: int) -> None:
        if attack == "end the call":
            _entry(counting, "kag_call_end")()
        elif attack == "begin a null call":
            _entry(counting, "kag_call_begin")(ctypes.c_uint64(0), 1)
        elif attack == "hand-over state":
            _entry(counting, "kag_post")(0)
        elif attack == "restart" and i == 0:
            _entry(counting, "kag_counter_start")(None, None, 0)
        elif attack == "stop" and i == 0:
            _entry(counting, "kag_counter_stop")()
        elif attack == "end, then a null call":  # the marks stay even: a null call counts none (an attacker's find)
            _entry(counting, "kag_call_end")()
            _entry(counting, "kag_call_begin")(ctypes.c_uint64(0), 1)
        elif attack == "start from a thread" and i == 0:  # a worker made the harness's (an attacker's find)
            worker = threading.Thread(target=lambda: (_entry(counting, "kag_counter_start")(None, None, 0),
                                                      _entry(counting, "kag_counter_stop")()))
            worker.start()
            worker.join()
        torch.relu(X)

    found = observed(body)
    assert found.error and "of the 3 calls of forward" in found.error, found


def test_ranges_named_like_the_harness_s_marks_do_not_cover_a_blinded_counter(counting):
    """Attack: the first call opens many ranges named like the calls' marks, then clears RecordFunction's
    callbacks, so later calls' operators go unseen while the marks look complete."""
    def body(i: int) -> None:
        if i == 0:
            for _ in range(10):
                with torch.autograd.profiler.record_function("kag::forward"):
                    pass
            torch._C._autograd._clear_callbacks()
        torch.relu(X)

    found = observed(body)
    assert found.error and "of the 3 calls of forward" in found.error, found


def test_a_file_at_the_harness_library_s_path_that_is_not_its_file_counts_as_foreign(counting, tmp_path):
    """The CPU samples count the counter's code as the observer's (runtime) by its file's path, device and
    inode: a candidate's own file at that path (its private /tmp) is another file, foreign."""
    path = counting._name
    device, inode = provenance.HARNESS_LIBRARIES[path]
    prov = provenance.CpuProvenance(pid=0, solution_dir=None)
    prov._maps = [provenance.Mapping(0x1000, 0x2000, path, 0, device, inode),
                  provenance.Mapping(0x2000, 0x3000, path, 0, device, inode + 1)]
    prov._starts = [m.start for m in prov._maps]
    assert provenance.category(prov._where(0x1800), None, strict=True) == "runtime"
    assert provenance.category(prov._where(0x2800), None, strict=True) == "foreign"


def test_names_cannot_forge_the_report_s_lines_nor_cut_it_short(counting):
    """Attack (an independent attacker's): range names holding newlines and tabs wrote lines of their own
    (totals that matched the calls), and one name of 65 MiB pushed the real lines past the buffer the
    report was read into. Names are cut and their control characters replaced now; the report ends with a
    count of its lines."""
    def body(i: int) -> None:
        with torch.autograd.profiler.record_function(f"\x01{i:09d}\nmarkers\t\t{2 * (i + 1)}\nbroken\t\t0\n"):
            pass
        if i == 0:
            with torch.autograd.profiler.record_function("\x01~" + "A" * (65 << 20)):
                pass
        torch.relu(X)

    found = observed(body)
    assert found.error is None and found.ops.get("aten::relu") == 3, found


def test_a_finalizer_run_as_the_harness_drops_outputs_counts_as_hand_over_work(counting):
    """Attack (an independent attacker's): a finalizer on a call's output runs PyTorch when the harness lets
    the window's outputs go, between calls, where no operator was counted. They are let go inside the
    hand-over's range now."""
    import weakref

    from kag.core.eval.candidate.candidate import Harness

    harness = Harness(None, -1, -1)
    harness.observer = CallObserver("cpu")
    harness.observer.start()
    out = torch.empty(4)
    weakref.finalize(out, lambda: torch.relu(X))
    harness.outputs = [out]
    del out
    harness.drop_outputs()
    found = harness.observer.stop()
    assert found.post_ops.get("aten::relu") == 1, found


def test_replacing_the_observer_s_summary_is_seen_by_the_identity_check(counting):
    """Attack (an independent attacker's): one assignment at import blanks the counter's summary. The
    report is the candidate's word anyway; the identity check now names the replacement."""
    from kag.core.eval.candidate import observe
    from kag.core.eval.candidate.checks import compare_identities, snapshot_identities

    snapshot = snapshot_identities()
    saved = observe.summarize_counts
    try:
        observe.summarize_counts = lambda counts, obs, nulls=0: None
        found = compare_identities(snapshot)
    finally:
        observe.summarize_counts = saved
    assert any("summarize_counts" in v.detail for v in found), found
