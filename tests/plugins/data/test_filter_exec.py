"""The exec filter: each check rejects what it should, and the worker pool survives hangs and crashes."""

from __future__ import annotations

import pytest

from kag.plugins.data.filter_exec import ExecFilter, Reject, check_task

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Model(nn.Module):\n"
TAIL = ("\n\ndef get_inputs():\n    return [torch.rand(8, 16, 32, 32)]\n\n\n"
        "def get_init_inputs():\n    return []\n")


def task(init: str, forward: str) -> str:
    return (HEAD + "    def __init__(self):\n        super().__init__()\n" + f"        {init}\n"
            + "\n    def forward(self, x):\n" + f"        {forward}\n" + TAIL)


GOOD = task("self.conv = nn.Conv2d(16, 16, 3)", "return torch.relu(self.conv(x))")
WINDOW = (0.0, 1000.0)


def verdict(code: str, window=WINDOW) -> str:
    try:
        check_task(code, "cpu", window, compile_backend="aot_eager")
    except Reject as rej:
        return rej.reason
    return "ok"


def test_a_good_task_passes_with_measurements():
    out = check_task(GOOD, "cpu", WINDOW, compile_backend="aot_eager")
    assert out["eager_ms"] > 0 and out["output_shapes"] == [[8, 16, 30, 30]]


@pytest.mark.parametrize("code, reason", [
    (task("self.drop = nn.Dropout(0.5)", "return self.drop(x)"), "nondeterministic"),
    (task("pass", "return x + torch.rand_like(x)"), "nondeterministic"),
    (task("pass", "return x * 0.0"), "constant_output"),
    (task("pass", "return torch.softmax(x.sum(dim=(1, 2, 3), keepdim=True), dim=1)"), "constant_output"),
    (task("pass", "return torch.ones_like(x) + 1e-7 * x"), "indistinguishable"),
    (task("pass", "return torch.log(x - 2.0)"), "non_finite_output"),
    (task("pass", "return x.reshape(3, -1, 7)"), "eager_error"),
    (task("pass", "return x + 1 if not torch.compiler.is_compiling() else x + 2"), "compile_mismatch"),
    ("import torch\nraise ImportError('no such lib')\n", "load_error"),
    (task("pass", "return (x.item(), 1)"), "eager_error"),
])
def test_each_check_rejects_what_it_should(code, reason):
    assert verdict(code) == reason


def test_time_window():
    assert verdict(GOOD, window=(10_000.0, 20_000.0)) == "too_fast"
    assert verdict(GOOD, window=(0.0, 1e-6)) == "too_slow"


HANG = task("pass", "import time; time.sleep(60); return x")
CRASH = task("pass", "import os; os._exit(3)")


def test_pool_isolates_hangs_and_crashes():
    filt = ExecFilter(device="cpu", workers=2, timeout_s=4, window_ms=WINDOW, compile_backend="aot_eager")
    results = dict(filt.run([("hang", HANG), ("crash", CRASH), ("good", GOOD), ("good2", GOOD)]))
    assert results["hang"]["reason"] == "timeout"
    assert results["crash"]["reason"] == "worker_crash" and "exit code 3" in results["crash"]["detail"]
    assert results["good"]["ok"] and results["good2"]["ok"]


def test_device_option():
    import torch

    from kag.core.data.synthesis import SynthesisError

    assert ExecFilter(device="auto").device == ("cuda" if torch.cuda.is_available() else "cpu")
    assert ExecFilter(device="cpu", window_ms="0.5,5").window_ms == (0.5, 5.0)
    if not torch.cuda.is_available():
        with pytest.raises(SynthesisError, match="no CUDA GPU"):
            ExecFilter(device="cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_pool_runs_one_worker_per_gpu():
    import torch

    filt = ExecFilter(device="cuda", window_ms=WINDOW)
    assert len(filt.slots) == torch.cuda.device_count()
    assert dict(filt.run([("good", GOOD)]))["good"]["ok"]


@pytest.mark.slow  # 30 s: it holds the timing slot on purpose
def test_a_task_waiting_for_a_held_timing_slot_is_not_timed_out():
    """Under load: 2 of 24 good tasks were rejected as `timeout` beside other kag processes, their
    clock counting the wait for the machine-wide timing slot. The clock now stops while a task waits
    for a slot: held here for 3x the timeout, the good task still passes, and a hang still times out."""
    import threading
    import time

    from kag.core.eval.orchestrator.timing_lock import TimingSlot, slot_name

    filt = ExecFilter(device="cpu", workers=1, timeout_s=6, window_ms=WINDOW, compile_backend="aot_eager")
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with TimingSlot(slot_name("cpu")).exclusive() as slot:  # another process's timing, in effect
            assert slot.locked
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(30)
    t0 = time.perf_counter()
    timer = threading.Timer(18, release.set)  # the slot is held 18 s: three timeouts
    timer.start()
    try:
        results = dict(filt.run([("good", GOOD)]))
    finally:
        release.set()
        holder.join()
    assert time.perf_counter() - t0 > 18  # it did wait for the slot
    assert results["good"]["ok"], results
    results = dict(filt.run([("hang", HANG)]))  # its own time still counts
    assert results["hang"]["reason"] == "timeout" and "of its own" in results["hang"]["detail"]
