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
    """The counter as a shared library against the torch this process imported (its headers, its
    C++ ABI), linked to the libraries torch already loaded."""
    import torch
    from torch.utils.cpp_extension import include_paths, library_paths

    src = out_dir / "op_counter.cpp"
    src.write_text(SOURCE)
    lib = out_dir / "op_counter.so"
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    cmd = [os.environ.get("CXX", "g++"), "-O2", "-shared", "-fPIC", "-std=c++17", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
           *[f"-I{p}" for p in include_paths()], str(src), "-o", str(lib),
           *[f"-L{p}" for p in library_paths()], "-lc10", "-ltorch_cpu"]
    subprocess.run(cmd, check=True)
    return lib


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

    from kag.core.eval.candidate.observe import all_threads, python_markers

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

    def row(cond: str, side: str, us: float, **extra) -> None:
        rows.append({"task": args.task, "backend": args.backend, "cond": cond, "side": side, "cpu_us_a_call": us, **extra})
        print(json.dumps(rows[-1]), flush=True)

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

        row("bare", side, cpu_us(lambda m=model: m(*inputs), sync))
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
        python_markers(True)
        prof.__exit__(None, None, None)
        lib.counter_start()
        row("kag's op counter again (after a profiler session)", side, cpu_us(marked, sync))
        lib.counter_stop()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, f"op_counter_{args.task}_{args.backend}.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
