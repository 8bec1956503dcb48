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
def counting(op_counter_library, monkeypatch):
    from kag.core.eval.candidate import op_counter

    monkeypatch.setattr(op_counter, "LOADED", op_counter_library)
    return op_counter_library


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


@pytest.mark.parametrize("attack", ["end the call", "begin a null call", "hand-over state", "restart", "stop"])
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
        torch.relu(X)

    found = observed(body)
    if attack == "hand-over state":  # refused inside a call: the fallback is counted
        assert found.error is None and found.ops.get("aten::relu") == 3, found
    else:
        assert found.error and "marks of the 3 calls of forward" in found.error, found


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
    path = next(p for p in provenance.HARNESS_LIBRARIES)
    device, inode = provenance.HARNESS_LIBRARIES[path]
    prov = provenance.CpuProvenance(pid=0, solution_dir=None)
    prov._maps = [provenance.Mapping(0x1000, 0x2000, path, 0, device, inode),
                  provenance.Mapping(0x2000, 0x3000, path, 0, device, inode + 1)]
    prov._starts = [m.start for m in prov._maps]
    assert provenance.category(prov._where(0x1800), None, strict=True) == "runtime"
    assert provenance.category(prov._where(0x2800), None, strict=True) == "foreign"
