"""Clocks, cache flushes and device facts shared by the judge's timing (kag.core.eval.judge.judge_timing) and
the analysis step. Trusted side: only the judge and the orchestrator use this module.

A "flush" evicts the inputs and weights from the cache so every timed call starts cold (GPU L2:
write a buffer twice its size; CPU: add to a buffer twice the last-level cache, capped). It is done
by the judge in its own process while the candidate is stopped: the cache is shared, so the
candidate's data is evicted as well.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from kag.core.records import TimingStats

# The CPU "flush" writes min(2 x last-level cache, this) bytes: VMs report huge shared L3s
# (hundreds of MB) and writing a GB per iteration would make CPU timing take minutes.
CPU_FLUSH_CAP_BYTES = 64 << 20
DEFAULT_L2_BYTES = 50 << 20


class Clock:
    """Timer and flush references captured before any untrusted code is imported."""

    def __init__(self, device: str):
        import torch

        self.device = device
        self.cuda = device.startswith("cuda")
        self.perf_counter = time.perf_counter
        self.zero_ = torch.Tensor.zero_
        self.add_ = torch.Tensor.add_
        self.empty = torch.empty
        self.uint8 = torch.uint8
        self.no_grad = torch.no_grad
        if self.cuda:
            self.synchronize = torch.cuda.synchronize
            self.flush_bytes = 2 * l2_cache_bytes()
        else:
            self.synchronize = lambda: None
            self.flush_bytes = min(2 * cpu_llc_bytes(), CPU_FLUSH_CAP_BYTES)
        self._flush_buf: Any = None

    def flush(self) -> None:
        """Evict the inputs and weights from the cache so every iteration starts cold."""
        if self._flush_buf is None:
            self._flush_buf = self.empty(self.flush_bytes, dtype=self.uint8, device=self.device)
        if self.cuda:
            self.zero_(self._flush_buf)
        else:
            self.add_(self._flush_buf, 1)

    def release(self) -> None:
        self._flush_buf = None

    def time_once(self, run: Callable[[], Any]) -> float:
        """Milliseconds of one ``run()`` on the wall clock, ending with a device-wide synchronise."""
        self.synchronize()
        t0 = self.perf_counter()
        out = run()
        self.synchronize()
        t1 = self.perf_counter()
        del out
        return (t1 - t0) * 1000.0


def summarize(times_ms: list[float]) -> TimingStats:
    """Median and spread of the timed iterations (the median is the number that counts)."""
    if not times_ms:
        raise ValueError("no timed iterations")
    ordered = sorted(times_ms)
    q = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
    return TimingStats(
        median_ms=statistics.median(ordered),
        mean_ms=statistics.fmean(ordered),
        min_ms=ordered[0],
        max_ms=ordered[-1],
        std_ms=statistics.pstdev(ordered) if len(ordered) > 1 else 0.0,
        iqr_ms=q[2] - q[0],
        n=len(ordered),
    )


# ---------------------------------------------------------------------------------------------
# device facts
def l2_cache_bytes() -> int:
    import torch

    try:
        size = int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0))
    except Exception:  # noqa: BLE001 - an unknown size falls back to a safe upper bound
        size = 0
    return size if size > 0 else DEFAULT_L2_BYTES


def cpu_llc_bytes() -> int:
    """Largest cache size sysfs reports for cpu0 (the last-level cache), 32 MB if unknown."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * mult)
    return best or (32 << 20)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_info(device: str, backend: str) -> dict[str, Any]:
    """Name, driver, clocks and software versions of the device a result was measured on."""
    import torch

    # str(): torch.__version__ is a TorchVersion, and unpickling one imports torch (seconds)
    info: dict[str, Any] = {"backend": backend, "torch": str(torch.__version__)}
    if not device.startswith("cuda"):
        info.update(name=cpu_name(), type="cpu", threads=torch.get_num_threads(), cpus=os.cpu_count())
        return info
    idx = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(idx)
    info.update(type="cuda", name=props.name, capability=f"{props.major}.{props.minor}",
                memory_gb=round(props.total_memory / 2**30, 1), l2_cache_bytes=l2_cache_bytes(),
                cuda=str(torch.version.cuda), visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
    info.update(nvml_info(props))
    return info


def nvml_info(props: Any) -> dict[str, Any]:
    """Driver and clocks from pynvml (nvidia-ml-py); empty when it is not installed."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001
        return {}
    out: dict[str, Any] = {}
    try:
        out["driver"] = _text(pynvml.nvmlSystemGetDriverVersion())
        uuid = getattr(props, "uuid", None)
        handle = None
        if uuid is not None:
            want = str(uuid)
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                if want in _text(pynvml.nvmlDeviceGetUUID(h)):
                    handle = h
                    break
        if handle is None:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        out["sm_clock_mhz"] = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        out["mem_clock_mhz"] = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)
        out["max_sm_clock_mhz"] = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
        out["power_limit_w"] = pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000.0
    except Exception as exc:  # noqa: BLE001 - partial info beats none
        out["nvml_error"] = str(exc)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return out


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
