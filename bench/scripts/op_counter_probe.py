"""What a call would cost if kag counted the operators itself, against torch.profiler's CPU session.

The observer's session records every operator of every call through Kineto: on an H200 it makes
diag_matmul's call 24.3-24.6 us of CPU against 12.0-16.1 bare, and kernel records are not the cost
(bench/results/2026-11-29-kernel-recorder-h200: the CPU side alone cost as much). The guards read
only counts: which operators ran inside forward, on the harness's thread or any other. This probe
builds a C++ counter on ATen's RecordFunction alone (one global callback, no event records, no
timestamps: a name counted under a lock when the calling thread is inside a call, or is not the
harness's) and times a solution's call (runs of 100, median of 30; the CPU a call takes to return)
bare, under the counter (the call marked through ctypes as the harness would, and not), and under
torch.profiler's CPU-only session as the observer runs it. It prints what the counter counted.
With ``--backend cuda`` it also runs the counter beside kag's kernel recorder (no profiler session at
all; its launch-API records as kag asks for them, and with every runtime and driver API recorded),
before and after a profiler session has started, with what the records attribute to a call and a
thread, and the loop's time a call (GPU-bound where it reads the kernel's time).

    python3 bench/scripts/op_counter_probe.py [--task diag_matmul|tiny] [--backend cpu|cuda] [--out DIR]

Trusted bench code; needs a C++ compiler and torch's headers (a torch wheel has them); a GPU for
``--backend cuda``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

SOURCE = r"""
#include <ATen/record_function.h>
#include <mutex>
#include <string>
#include <unordered_map>

static thread_local int in_call = 0;
static thread_local bool harness = false;
static std::mutex mu;
static std::unordered_map<std::string, long> counts;
static at::CallbackHandle handle = 0;

static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (harness && !in_call) return nullptr;
  std::lock_guard<std::mutex> guard(mu);
  counts[harness ? std::string(fn.name()) : std::string("thread:") + fn.name()]++;
  return nullptr;
}

extern "C" void counter_start() {
  harness = true;
  counts.clear();
  handle = at::addGlobalCallback(at::RecordFunctionCallback(on_start)
                                     .scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
}
extern "C" void counter_stop() { at::removeCallback(handle); }
extern "C" void counter_call(int on) { in_call = on; }
extern "C" int counter_names(char *out, int size) {
  std::lock_guard<std::mutex> guard(mu);
  std::string text;
  for (auto &kv : counts) text += kv.first + "\t" + std::to_string(kv.second) + "\n";
  int n = (int)text.size() < size - 1 ? (int)text.size() : size - 1;
  memcpy(out, text.data(), n);
  out[n] = 0;
  return n;
}
"""


def build(out_dir: Path) -> Path:
    """The probe's counter as a shared library, compiled as kag's own counter is
    (kag.core.eval.judge.op_counter_lib.compile_command: the imported torch's headers, ABI and libraries)."""
    from kag.core.eval.judge.op_counter_lib import compile_command

    src = out_dir / "op_counter.cpp"
    src.write_text(SOURCE)
    lib = out_dir / "op_counter.so"
    command = compile_command(src, lib)
    if command is None:
        raise SystemExit("torch has no headers here: the counter cannot be built")
    subprocess.run(command, check=True)
    return lib


VARIANTS = {"launch": "the launch APIs' records, as kag asks",
            "every": "every runtime and driver API recorded",
            "launch_of_every": "every API kind on, all but the launch APIs switched off",
            "subscribed": "a CUPTI subscriber of its own with no callback on, then the launch APIs"}
SIZES = {4: 807, 5: 523}  # CUPTI_DRIVER_TRACE_CBID_SIZE, CUPTI_RUNTIME_TRACE_CBID_SIZE (CUDA 13.0)


def _recorder_variants() -> dict:
    """kag's recorder with the API records asked for other ways: the per-API switches brought no
    records in a process where no profiler session had started (H200, 2026-11-29)."""
    from kag.core.eval.candidate import kernel_records as kr

    class Every(kr.KernelRecorder):
        keep_all = True

        def start(self) -> str | None:
            failed = super().start()
            for kind in (kr.KIND_RUNTIME, kr.KIND_DRIVER):
                rc = self.lib.cuptiActivityEnable(kind)
                if rc != 0:
                    return failed or f"CUPTI refused activity kind {kind} (error {rc})"
            if not self.keep_all:  # the header's way to a small set: the kind on, the others off
                for kind, enable, keep in ((kr.KIND_RUNTIME, self.lib.cuptiActivityEnableRuntimeApi, kr.RUNTIME_LAUNCHES),
                                           (kr.KIND_DRIVER, self.lib.cuptiActivityEnableDriverApi, kr.DRIVER_LAUNCHES)):
                    for cbid in range(1, SIZES[kind]):
                        if cbid not in keep:
                            enable(cbid, 0)
            return failed

        def stop(self) -> "kr.Records":
            for kind in (kr.KIND_RUNTIME, kr.KIND_DRIVER):
                self.lib.cuptiActivityDisable(kind)
            return super().stop()

    class LaunchOfEvery(Every):
        keep_all = False

    _CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)

    class Subscribed(kr.KernelRecorder):
        callback = _CB(lambda *a: None)

        def start(self) -> str | None:
            self.handle = ctypes.c_void_p()
            rc = self.lib.cuptiSubscribe(ctypes.byref(self.handle), self.callback, None)
            if rc != 0:
                return f"cuptiSubscribe: error {rc}"
            return super().start()

        def stop(self) -> "kr.Records":
            records = super().stop()
            self.lib.cuptiUnsubscribe(self.handle)
            return records

    return {"every": Every, "launch_of_every": LaunchOfEvery, "subscribed": Subscribed}


def cpu_us(fn, sync) -> float:
    """call_cost.py's measure (runs of 100 calls, the median run's CPU a call), in us to 2 places."""
    from call_cost import cpu_us as measured

    return round(measured(fn, sync), 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="diag_matmul")
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    args = ap.parse_args()
    import torch

    from timing_fidelity import load_pair

    from kag.core.eval.candidate.profiler_events import all_threads, python_markers

    if args.task == "tiny":  # a call of a few operators on 256 floats: the path, not the work
        x = torch.randn(256, device="cuda" if args.backend == "cuda" else "cpu")
        inputs = [x]
        ref = torch.relu
        new = lambda t: torch.relu(torch.empty_like(t).copy_(t))  # noqa: E731
    else:
        ref, new, make_inputs, _ = load_pair(args.task, args.backend)
        inputs = make_inputs(0)
    torch._C._set_grad_enabled(False)
    sync = torch.cuda.synchronize if args.backend == "cuda" else (lambda: None)
    rf = torch._C._profiler._RecordFunctionFast
    lib = ctypes.CDLL(str(build(Path(tempfile.mkdtemp(prefix="kag-opcount-")))))
    mark = lib.counter_call
    rows: list[dict] = []
    Variants = _recorder_variants() if args.backend == "cuda" else {}

    def row(cond: str, side: str, us: float, **extra) -> None:
        rows.append({"task": args.task, "backend": args.backend, "cond": cond, "side": side, "cpu_us_a_call": us, **extra})
        print(json.dumps(rows[-1]), flush=True)

    def recorded(side: str, model, when: str, variant: str = "launch") -> None:
        """The counter and kag's kernel recorder together (no torch.profiler session): a call's CPU, the
        loop's time a call (GPU-bound where it is the kernel's), and what the records attribute."""
        from call_cost import per_call_us

        from kag.core.eval.candidate.kernel_records import KernelRecorder

        recorder = (KernelRecorder if variant == "launch" else Variants[variant]).open()
        if recorder is None:
            row(f"kag's recorder ({when}): none", side, -1.0)
            return
        calls = [0]

        def traced(m=model) -> None:
            calls[0] += 1
            mark(1)
            recorder.push(calls[0])
            m(*inputs)
            recorder.pop()
            mark(0)

        lib.counter_start()
        failed = recorder.start()
        cond = f"op counter + kag's recorder ({VARIANTS[variant]}), {when}"
        us = cpu_us(traced, sync)
        loop = round(per_call_us(traced, 2000, sync), 2)
        records = recorder.stop()
        lib.counter_stop()
        row(cond, side, us, loop_us_a_call=loop, failed=failed, calls=calls[0], kernels=len(records.kernels),
            launch_threads=len(records.launch_thread), launch_calls=len(records.launch_call),
            kernels_with_thread=sum(1 for k in records.kernels if k.corr in records.launch_thread),
            kernels_with_call=sum(1 for k in records.kernels if k.corr in records.launch_call),
            dropped=records.dropped)

    for side, model in (("eager", ref), ("candidate", new)) if args.backend == "cuda" else ():
        for variant in ("launch", "every", "launch_of_every", "subscribed"):  # before any profiler session
            recorded(side, model, "no profiler session yet", variant)
    for side, model in (("eager", ref), ("candidate", new)):
        for _ in range(20):
            model(*inputs)
        sync()

        def ranged(m=model) -> None:
            with rf("kag::forward"):
                m(*inputs)

        def marked(m=model) -> None:
            mark(1)
            with rf("kag::forward"):
                m(*inputs)
            mark(0)

        from call_cost import per_call_us

        row("bare", side, cpu_us(lambda m=model: m(*inputs), sync),
            loop_us_a_call=round(per_call_us(lambda m=model: m(*inputs), 2000, sync), 2))
        row("bare, the forward range", side, cpu_us(ranged, sync))
        row("bare, the range and the ctypes marks", side, cpu_us(marked, sync))
        lib.counter_start()
        row("kag's op counter, the range and the marks", side, cpu_us(marked, sync))
        lib.counter_stop()
        text = ctypes.create_string_buffer(1 << 16)
        lib.counter_names(text, len(text))
        counted = dict(line.split("\t") for line in text.value.decode().splitlines())
        row("(what the counter counted)", side, -1.0, counted={k: int(v) for k, v in counted.items()})
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU], experimental_config=all_threads())
        prof.__enter__()
        python_markers(False)
        row("torch.profiler, CPU records only, the range", side, cpu_us(ranged, sync))
        if args.backend == "cuda":  # the observer's default session: CPU and kernel records
            python_markers(True)
            prof.__exit__(None, None, None)
            prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], experimental_config=all_threads())
            prof.__enter__()
            python_markers(False)
            row("torch.profiler, CPU and kernel records (the observer's default), the range", side,
                cpu_us(ranged, sync), loop_us_a_call=round(per_call_us(ranged, 2000, sync), 2))
        python_markers(True)
        prof.__exit__(None, None, None)
        lib.counter_start()
        row("kag's op counter again (after a profiler session)", side, cpu_us(marked, sync))
        lib.counter_stop()
        if args.backend == "cuda":  # the recorder's launch records, now that Kineto has its subscriber
            recorded(side, model, "after a profiler session")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, f"op_counter_{args.task}_{args.backend}.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
