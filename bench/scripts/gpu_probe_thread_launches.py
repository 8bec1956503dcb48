"""What the candidate's observer (kag.core.eval.candidate.observe) records of a kernel's launch, by who
launches it (the corpus case overlap_threads, a std::thread launching a call's kernel
after the call returned, was not seen). One profiler session like the observer's; each case is
called inside a forward range a few times:

  same_thread      a C++ binding launches on the calling thread
  thread_joined    a std::thread launches, joined before the call returns
  thread_detached  a std::thread launches, detached (the attack)
  cupy_main        a driver-API launch (cupy, as the nvrtc backend does) on the calling thread
  cupy_thread      the same from a Python thread

For every kernel: the event ``launches()`` finds for it and every CPU event with its correlation
id, and the observer's counts (``thread_launches``).

    python bench/scripts/gpu_probe_thread_launches.py     # thread_launches.json to $OUT when set
"""

from __future__ import annotations

import json
import os
import threading
import time

CUDA_SRC = r"""
#include <thread>
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void probe_relu(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] < 0.f ? 0.f : x[i];
}
static void launch(const float* x, float* y, int64_t n) { probe_relu<<<(n + 255) / 256, 256>>>(x, y, n); }
torch::Tensor same_thread(torch::Tensor x) {
  auto y = torch::empty_like(x); launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel()); return y;
}
torch::Tensor thread_joined(torch::Tensor x) {
  auto y = torch::empty_like(x); const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>(); int64_t n = x.numel();
  std::thread t([=] { launch(a, b, n); }); t.join(); return y;
}
torch::Tensor thread_detached(torch::Tensor x) {
  auto y = torch::empty_like(x); const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>(); int64_t n = x.numel();
  std::thread([=] { launch(a, b, n); }).detach(); return y;
}
"""
CPP_SRC = ("torch::Tensor same_thread(torch::Tensor x);\ntorch::Tensor thread_joined(torch::Tensor x);\n"
           "torch::Tensor thread_detached(torch::Tensor x);")
CUPY_SRC = r'''extern "C" __global__ void cupy_relu(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] < 0.f ? 0.f : x[i]; }'''


def main() -> None:
    import torch
    from torch.utils.cpp_extension import load_inline

    from kag.core.eval.candidate.observe import CallObserver

    from kag.core.eval.candidate.observations import HARNESS_RANGES, Observations

    from kag.core.eval.candidate.profiler_events import launches, raw_events, summarize_events

    t0 = time.time()
    ext = load_inline("kag_probe_threads", CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["same_thread", "thread_joined", "thread_detached"], verbose=False)
    print(f"built in {time.time() - t0:.1f} s", flush=True)
    x = torch.randn(1 << 20, device="cuda")
    cases = {name: getattr(ext, name) for name in ("same_thread", "thread_joined", "thread_detached")}
    try:
        import cupy

        kernel = cupy.RawKernel(CUPY_SRC, "cupy_relu")

        def cupy_main(t):  # noqa: ANN001, ANN202
            y = torch.empty_like(t)
            with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                kernel(((t.numel() + 255) // 256,), (256,), (t.data_ptr(), y.data_ptr(), cupy.int64(t.numel())))
            return y

        def cupy_thread(t):  # noqa: ANN001, ANN202
            out = []
            th = threading.Thread(target=lambda: out.append(cupy_main(t)))
            th.start()
            th.join()
            return out[0]

        cases.update(cupy_main=cupy_main, cupy_thread=cupy_thread)
    except Exception as exc:  # noqa: BLE001
        print("no cupy:", exc)
    report = {}
    for name, fn in cases.items():
        for _ in range(2):
            fn(x)
        torch.cuda.synchronize()
        obs = CallObserver("cuda", kernels=True)
        obs.start()
        for _ in range(4):
            with obs.forward_range():
                fn(x)
            time.sleep(0.01)
        torch.cuda.synchronize()
        prof = obs._prof
        prof.__exit__(None, None, None)
        events = raw_events(prof)
        launch_of = launches(events)
        rows = []
        for e in events:
            if e.cuda and not e.annotation and e.name not in HARNESS_RANGES:
                lo = launch_of(e)
                same_corr = [(c.name, c.thread, c.linked) for c in events if not c.cuda and c.corr == e.corr]
                rows.append({"kernel": e.name[:50], "corr": e.corr, "linked": e.linked,
                             "launch": None if lo is None else [lo.name, lo.thread, lo.linked], "cpu_same_corr": same_corr})
        counts = Observations(calls=4)
        summarize_events(events, counts)
        report[name] = {"kernels": rows[:6], "n_kernels": len(rows), "thread_launches": counts.thread_launches,
                        "harness_threads": sorted({e.thread for e in events if e.name in HARNESS_RANGES and not e.cuda})}
        print(name, json.dumps(report[name])[:900], flush=True)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "thread_launches.json"), "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
