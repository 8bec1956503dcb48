"""What a kernel recorder of kag's own would cost a call, against torch.profiler's session.

The observer's profiler session is 13-17 us of a small kernel's 33-37 us call on an H200
(bench/results/2026-11-29-8aeb477-h200), and the calls of kernels shorter than the path are timed
as the path. The no-hidden-work guard needs only each call's kernels (when they ran, which call
launched them). This probe builds a small C library on CUPTI alone: kernel activity records
(``CONCURRENT_KERNEL``) and, optionally, a callback on the kernel-launch API calls only (runtime
``cudaLaunchKernel``/``cudaLaunchKernelExC``, driver ``cuLaunchKernel``/``cuLaunchKernelEx``) that
notes which call, set by the harness before each one, made each launch. For the diag_matmul
example (one kernel a call) it prints the CPU time a call takes to return (runs of 100 calls, as
bench/scripts/call_cost.py) bare, under the lean recorder (records only, records and launch
callbacks) and under torch.profiler's session as the observer runs it, and whether the lean
recorder attributed every kernel to its call.

The lean conditions run first: CUPTI takes one subscriber per process, and Kineto may keep its own.

    python3 bench/scripts/gpu_probe_lean_recorder.py [--task diag_matmul] [--out DIR]

Trusted bench code; needs one NVIDIA GPU, CUDA torch, nvcc and CUPTI's header (the CUDA toolkit).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

SOURCE = r"""
#include <cupti.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#define MAX 1000000
static uint64_t k_start[MAX], k_end[MAX];
static uint32_t k_corr[MAX];
static int k_n = 0, dropped = 0;
static uint32_t l_corr[MAX];
static int l_call[MAX];
static int l_tid[MAX];
static __thread int my_tid = 0;
static int callbacks_seen = 0;
static int l_n = 0;
static volatile int current_call = -1;
static CUpti_SubscriberHandle subscriber;
static int subscribed = 0;

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *size = 8 << 20;
  *buffer = (uint8_t *)aligned_alloc(8, *size);
  *max_records = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  CUpti_Activity *record = NULL;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)record;
      if (k_n < MAX) { k_start[k_n] = k->start; k_end[k_n] = k->end; k_corr[k_n] = k->correlationId; k_n++; }
    }
  }
  size_t lost = 0;
  cuptiActivityGetNumDroppedRecords(ctx, stream, &lost);
  dropped += (int)lost;
  free(buffer);
}

static void CUPTIAPI on_launch(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
  const CUpti_CallbackData *cb = (const CUpti_CallbackData *)data;
  callbacks_seen++;
  if (cb->callbackSite == CUPTI_API_ENTER && l_n < MAX) {
    if (!my_tid) my_tid = (int)syscall(SYS_gettid);
    l_corr[l_n] = cb->correlationId;
    l_call[l_n] = current_call;
    l_tid[l_n] = my_tid;
    l_n++;
  }
}

int lean_start(int callbacks) {
  k_n = l_n = dropped = callbacks_seen = 0;
  CUptiResult rc = cuptiActivityRegisterCallbacks(requested, completed);
  if (rc != CUPTI_SUCCESS) return -1000 - (int)rc;
  if (callbacks) {
    rc = cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_launch, NULL);
    if (rc != CUPTI_SUCCESS) return -2000 - (int)rc;
    subscribed = 1;
    if (callbacks == 2) {  /* every runtime and driver call (a graph's or a cooperative launch too) */
      cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
      cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
    }
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060);
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx);
  }
  rc = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (rc != CUPTI_SUCCESS) return -3000 - (int)rc;
  return 0;
}

void lean_set_call(int call) { current_call = call; }
int *lean_call_word(void) { return (int *)&current_call; }

int lean_stop(void) {
  cuptiActivityFlushAll(1);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityFlushAll(1);
  if (subscribed) { cuptiUnsubscribe(subscriber); subscribed = 0; }
  return k_n;
}

int lean_dropped(void) { return dropped; }
int lean_launches(void) { return l_n; }
int lean_callbacks_seen(void) { return callbacks_seen; }
int lean_tid(int i) { return l_tid[i]; }
void lean_kernel(int i, uint64_t *start, uint64_t *end, uint32_t *corr) { *start = k_start[i]; *end = k_end[i]; *corr = k_corr[i]; }
void lean_launch(int i, uint32_t *corr, int *call) { *corr = l_corr[i]; *call = l_call[i]; }
"""


def build(out_dir: Path) -> Path:
    """The recorder as a shared library, linked against the CUPTI this process has loaded where torch
    loaded one (by its soname), else the toolkit's."""
    from torch.utils.cpp_extension import CUDA_HOME

    homes = [os.environ.get("CUDA_HOME"), CUDA_HOME, "/usr/local/cuda"] + sorted(map(str, Path("/usr/local").glob("cuda-*")))
    cuda_home = next((h for h in homes if h and (any((Path(h) / d / "cupti.h").is_file()
                                                      for d in ("include", "extras/CUPTI/include")))), None)
    if cuda_home is None:
        raise SystemExit(f"no CUPTI header (cupti.h) under any of {homes}: set CUDA_HOME to the CUDA toolkit")
    src = out_dir / "lean_recorder.c"
    src.write_text(SOURCE)
    lib = out_dir / "lean_recorder.so"
    cupti = [line.split()[-1] for line in open("/proc/self/maps") if "libcupti.so" in line]
    link = [f"-L{Path(cupti[0]).parent}", f"-l:{Path(cupti[0]).name}"] if cupti else [f"-L{cuda_home}/lib64", f"-L{cuda_home}/lib", f"-L{cuda_home}/extras/CUPTI/lib64", "-lcupti"]
    includes = [f"-I{cuda_home}/include", f"-I{cuda_home}/extras/CUPTI/include"]
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(src), "-o", str(lib), *includes, *link], check=True)
    return lib


def cpu_us(fn, sync, calls: int = 100, runs: int = 30) -> float:
    times = []
    for _ in range(runs):
        sync()
        t0 = time.perf_counter()
        for j in range(calls):
            fn(j)
        times.append((time.perf_counter() - t0) / calls * 1e6)
    sync()
    return round(statistics.median(times), 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="diag_matmul")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    args = ap.parse_args()
    import torch

    from timing_fidelity import load_pair

    ref, new, make_inputs, _ = load_pair(args.task, "cuda")
    inputs = make_inputs(0)
    torch._C._set_grad_enabled(False)
    sync = torch.cuda.synchronize
    for _ in range(50):
        new(*inputs)
    sync()
    lib = ctypes.CDLL(str(build(Path(tempfile.mkdtemp(prefix="kag-lean-")))))
    lib.lean_call_word.restype = ctypes.c_void_p  # a pointer (the default int would cut it to 32 bits)
    word = ctypes.cast(lib.lean_call_word(), ctypes.POINTER(ctypes.c_int))  # the call index, set without a ctypes call
    rows: list[dict] = []

    def row(cond: str, side: str, us: float, **extra) -> None:
        rows.append({"task": args.task, "cond": cond, "side": side, "cpu_us_a_call": us, **extra})
        print(json.dumps(rows[-1]), flush=True)

    def marked(model):
        def call(j: int) -> None:
            word[0] = j
            model(*inputs)
        return call

    labels = {0: "kernel records", 1: "kernel records, launch callbacks",
              2: "kernel records, callbacks on every runtime and driver call"}

    def lean(side: str, model, callbacks: int, cond: str) -> None:
        rc = lib.lean_start(callbacks)
        if rc != 0:
            row(cond, side, -1.0, error=f"lean_start returned {rc}")
            return
        us = cpu_us(marked(model), sync)
        kernels, launches = lib.lean_stop(), lib.lean_launches()
        call_of: dict[int, int] = {}
        for i in range(launches):
            corr, call = ctypes.c_uint32(), ctypes.c_int()
            lib.lean_launch(i, ctypes.byref(corr), ctypes.byref(call))
            call_of[corr.value] = call.value
        attributed = 0
        for i in range(kernels):
            start, end, corr = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint32()
            lib.lean_kernel(i, ctypes.byref(start), ctypes.byref(end), ctypes.byref(corr))
            attributed += corr.value in call_of
        tids = sorted({lib.lean_tid(i) for i in range(min(launches, 1000))})
        row(cond, side, us, kernels=kernels, launches=launches, attributed=attributed, dropped=lib.lean_dropped(),
            callbacks_seen=lib.lean_callbacks_seen(), launch_tids=tids, my_tid=threading.get_native_id())

    for side, model in (("eager", ref), ("candidate", new)):
        row("bare", side, cpu_us(lambda j, m=model: m(*inputs), sync))
        row("bare, the call index set", side, cpu_us(marked(model), sync))
        for callbacks in (0, 1, 2):
            lean(side, model, callbacks, f"lean recorder ({labels[callbacks]})")
    from torch.profiler import ProfilerActivity, profile

    from kag.core.eval.candidate.profiler_events import all_threads

    # kag's own recorder (kag.core.eval.candidate.kernel_records), as the observer drives it: kernel,
    # launch-API and external-correlation records, an id pushed and popped around each call
    from kag.core.eval.candidate.kernel_records import KernelRecorder

    for side, model in (("eager", ref), ("candidate", new)):
        rec = KernelRecorder.open()
        if rec is None:
            row("kag's recorder", side, -1.0, error="no CUPTI mapped")
            continue
        row("bare, kag's recorder's push and pop (not started)", side,
            cpu_us(lambda j, m=model: (rec.push(j + 1), m(*inputs), rec.pop()), sync))
        for pushed in (False, True):
            failed = rec.start()
            if failed:
                row("kag's recorder", side, -1.0, error=failed)
                break
            fn = (lambda j, m=model: (rec.push(j + 1), m(*inputs), rec.pop())) if pushed else (lambda j, m=model: m(*inputs))
            us = cpu_us(fn, sync)
            got = rec.stop()
            row(f"kag's recorder{', an id pushed a call' if pushed else ', no id pushed'}", side, us,
                kernels=len(got.kernels), launches=len(got.launch_thread), attributed=len(got.launch_call),
                dropped=got.dropped)

    # the checks' design: torch.profiler's session for operators only (no CUDA activity: CUPTI left to ours)
    for side, model in (("eager", ref), ("candidate", new)):
        prof = profile(activities=[ProfilerActivity.CPU], experimental_config=all_threads())
        prof.__enter__()
        rf = torch._C._profiler._RecordFunctionFast

        def ranged_cpu(j: int, m=model) -> None:
            word[0] = j
            with rf("kag::forward"):
                m(*inputs)
        row("torch.profiler, CPU records only, range", side, cpu_us(ranged_cpu, sync))
        lean(side, model, 1, "lean recorder (launch callbacks) inside torch.profiler's CPU-only session")
        prof.__exit__(None, None, None)
        lean(side, model, 1, "lean recorder (launch callbacks) after a CPU-only session ended")
    for side, model in (("eager", ref), ("candidate", new)):
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], experimental_config=all_threads())
        prof.__enter__()
        torch.autograd.profiler._is_profiler_enabled = False
        rf = torch._C._profiler._RecordFunctionFast

        def ranged(j: int, m=model) -> None:
            with rf("kag::forward"):
                m(*inputs)
        row("torch.profiler, the observer's session and range", side, cpu_us(ranged, sync))
        torch.autograd.profiler._is_profiler_enabled = True
        prof.__exit__(None, None, None)
        # does Kineto keep CUPTI's one subscriber after its session?
        lean(side, model, 1, "lean recorder (launch callbacks) after torch.profiler's CUDA session ended")
    # a CUDA graph's kernels: launched by cudaGraphLaunch, which only the every-call mode sees
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            new(*inputs)
    sync()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        new(*inputs)
    for callbacks in (1, 2):
        lean("graph", type("G", (), {"__call__": lambda self, *a: graph.replay()})(), callbacks,
             f"a CUDA graph's replay, lean recorder ({labels[callbacks]})")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, "lean_recorder.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
