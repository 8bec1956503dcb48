"""The paper's analysis step: where the reference spends its time, and the target to beat.

Run before any kernel is written (``utils/profiling.py`` on an untouched workspace, or
``kag profile --reference``): the reference's kernels from the profiler (name, launches, share of
the time), the eager and torch.compile times, the target (compile time x 0.95) and the GPU's
compute capability. Runs the reference only, in a spawned process.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
from typing import Any

from kag.core.records import Task

TARGET = 0.95


def _median_ms(clock: Any, run: Any, iters: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        clock.time_once(run)
    return statistics.median(clock.time_once(run) for _ in range(iters))


def _worker(code: str, device: str, compile_mode: str, iters: int, queue: Any) -> None:
    try:
        queue.put(("ok", _analyse(code, device, compile_mode, iters)))
    except BaseException as exc:  # noqa: BLE001 - the report says what failed
        queue.put(("error", f"{type(exc).__name__}: {exc}"))


def _analyse(code: str, device: str, compile_mode: str, iters: int) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from kag.core.tasks import load_module
    from kag.core.eval.candidate.profiler_events import quiet_stderr
    from kag.core.eval.judge.timing import Clock

    ns = load_module(code, "model.py")
    torch.manual_seed(42)
    with torch.device(device):
        model = ns["Model"](*ns["get_init_inputs"]()).eval()
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
    clock = Clock(device)
    with torch.no_grad():
        eager = _median_ms(clock, lambda: model(*inputs), iters)
        compiled = torch.compile(model, mode=None if compile_mode == "default" else compile_mode)
        compile_ms = _median_ms(clock, lambda: compiled(*inputs), iters)
        cuda = device.startswith("cuda")
        prof = profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU])
        with quiet_stderr():
            prof.__enter__()
        try:
            for _ in range(iters):
                model(*inputs)
            clock.synchronize()
        finally:
            with quiet_stderr():
                prof.__exit__(None, None, None)
    kernels: dict[str, list[float]] = {}
    for e in prof.events():
        if cuda and e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        if not cuda and (e.cpu_parent is not None or not e.name.startswith("aten::")):
            continue
        kernels.setdefault(e.name, []).append(e.time_range.elapsed_us() if cuda else e.cpu_time_total)
    total = sum(sum(v) for v in kernels.values()) or 1.0
    rows = sorted(({"name": k, "launches_per_call": len(v) / iters, "us_per_call": sum(v) / iters,
                    "share": sum(v) / total} for k, v in kernels.items()), key=lambda r: -r["share"])
    props = {"name": torch.cuda.get_device_name(), "compute_capability": ".".join(
        map(str, torch.cuda.get_device_capability()))} if cuda else {"name": "cpu", "compute_capability": None}
    return {"eager_ms": eager, "compile_ms": compile_ms, "target_ms": TARGET * compile_ms, "kernels": rows,
            "device": props, "kind": "kernels" if cuda else "aten ops", "iters": iters}


def analyse_reference(task: Task, device: str, compile_mode: str = "default", iters: int = 10,
                      timeout_s: float = 900) -> dict[str, Any]:
    """The analysis of ``task``'s reference on ``device`` ("cuda" or "cpu"), from a fresh process."""
    from kag.core.trust.procs import spawn_process

    queue = mp.get_context("spawn").Queue()
    proc = spawn_process(_worker, (task.code, device, compile_mode, iters, queue), "kag-analysis")
    try:
        status, payload = queue.get(timeout=timeout_s)
    except Exception:
        status, payload = "error", f"the analysis did not finish within {timeout_s:.0f} s"
    finally:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()
    if status != "ok":
        raise RuntimeError(f"analysing the reference failed: {payload}")
    return payload


def is_untouched(task: Task, solution: Any) -> bool:
    """The workspace still holds the starter model_new.py and no kernels: time for the analysis."""
    from kag.core.agent.workspace import starter_model_new

    return not solution.kernels and solution.model_new.strip() == starter_model_new(task.code).strip()


def format_analysis(a: dict[str, Any], top: int = 15) -> str:
    dev = a["device"]
    cc = f", compute capability {dev['compute_capability']}" if dev.get("compute_capability") else ""
    lines = [f"reference analysis on {dev['name']}{cc}",
             f"  eager: {a['eager_ms']:.4f} ms   torch.compile: {a['compile_ms']:.4f} ms   "
             f"target: <= {a['target_ms']:.4f} ms (compile x {TARGET})",
             f"  {len(a['kernels'])} distinct {a['kind']} per forward (share of the reference's time):"]
    for r in a["kernels"][:top]:
        lines.append(f"  {100 * r['share']:5.1f}%  {r['us_per_call']:10.1f} us  x{r['launches_per_call']:g}  {r['name'][:110]}")
    if len(a["kernels"]) > top:
        lines.append(f"  ... and {len(a['kernels']) - top} more")
    return "\n".join(lines)
