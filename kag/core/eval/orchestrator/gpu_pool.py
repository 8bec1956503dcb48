"""A pool that hands each evaluation one device exclusively while it checks and times.

Exclusive across threads (a lock per device) and across processes on the host (an ``flock`` on
``<lock dir>/gpu-<id>.lock``), so two evaluations never time on the same GPU at once. The worker
processes see only their GPU: the caller sets ``CUDA_VISIBLE_DEVICES`` from the slot it gets.
Devices come from ``CUDA_VISIBLE_DEVICES`` when set, else pynvml, else torch.
"""

from __future__ import annotations

import contextlib
import functools
import fcntl
import os
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Iterator

import attrs


@attrs.frozen
class DeviceSlot:
    """One held device: ``visible`` is the value for CUDA_VISIBLE_DEVICES (None on the CPU)."""

    kind: str
    id: str
    visible: str | None


def list_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML: ask torch
        pass
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001
        return []


def torch_cuda_version() -> str | None:
    """The CUDA version torch was built for, read from ``torch/version.py`` without importing torch
    ("" when that file cannot be read: then only an import can tell)."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("torch")
    for root in (spec.submodule_search_locations or []) if spec else []:
        try:
            text = (Path(root) / "version.py").read_text(encoding="utf-8")
        except OSError:
            continue
        match = re.search(r"^cuda\b[^=]*=\s*(None|'[^']*'|\"[^\"]*\")", text, re.M)
        if match:
            return None if match[1] == "None" else match[1][1:-1]
    return ""


def cuda_usable() -> bool:
    """Whether the cuda backend can run here: a CUDA build of torch and a visible GPU.

    Answered without importing torch where it can be (torch/version.py, then ``list_gpus``: the
    visible devices or NVML): importing torch
    costs seconds on a GPU machine, which a one-shot ``kag score`` would pay before its judge even
    starts."""
    version = torch_cuda_version()
    if version is None:
        return False
    if version:
        return bool(list_gpus())
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def pick_backend(backend: str) -> str:
    """``"auto"`` -> ``"cuda"`` when :func:`cuda_usable`, else ``"cpu"``; any other name as given.

    The one place "auto" is decided, so ``kag run``/``eval``/``score`` and the training
    environments agree on which backend a machine gets."""
    if backend != "auto":
        return backend
    return "cuda" if cuda_usable() else "cpu"


def cuda_home() -> Path | None:
    """The CUDA toolkit: $CUDA_HOME/$CUDA_PATH, /usr/local/cuda, or the one holding nvcc."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    for cand in candidates:
        if cand and (Path(cand) / "include" / "cuda_runtime_api.h").exists():
            return Path(cand)
    return None


@functools.lru_cache(maxsize=None)
def gpu_arch() -> str | None:
    """The first visible GPU's compute capability (pynvml, else torch), None without a GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or re.fullmatch(r"\d+(,\d+)*", visible.strip()):
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                index = int(visible.split(",")[0]) if visible else 0
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(pynvml.nvmlDeviceGetHandleByIndex(index))
                return f"{major}.{minor}"
            finally:
                pynvml.nvmlShutdown()
        except Exception:  # no driver / no NVML: ask torch below
            pass
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"{major}.{minor}"
    except Exception:
        pass
    return None


class GpuPool:
    def __init__(self, devices: list[str] | None = None, lock_dir: str | Path | None = None):
        self._devices = devices
        from kag.core.eval.orchestrator.timing_lock import lock_dir as default_lock_dir

        self.lock_dir = Path(lock_dir) if lock_dir else default_lock_dir()  # the timing slots' folder too
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @property
    def devices(self) -> list[str]:
        if self._devices is None:
            self._devices = list_gpus()
        return self._devices

    def _thread_lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def _try(self, key: str) -> tuple[threading.Lock, int] | None:
        lock = self._thread_lock(key)
        if not lock.acquire(blocking=False):
            return None
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_dir / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            lock.release()
            return None
        return lock, fd

    @contextlib.contextmanager
    def acquire(self, kind: str = "cuda", timeout_s: float | None = None) -> Iterator[DeviceSlot]:
        """Hold one device of ``kind`` ("cuda" or "cpu") until the block ends."""
        if kind == "cpu":
            keys = [("cpu", None)]
        else:
            if not self.devices:
                raise RuntimeError("no CUDA device is visible; use --backend cpu or check CUDA_VISIBLE_DEVICES")
            keys = [(f"gpu-{d}", d) for d in self.devices]
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            for key, visible in keys:
                held = self._try(key)
                if held is not None:
                    lock, fd = held
                    try:
                        yield DeviceSlot(kind, key, visible)
                    finally:
                        fcntl.flock(fd, fcntl.LOCK_UN)
                        os.close(fd)
                        lock.release()
                    return
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"no free {kind} device within {timeout_s:g} s")
            time.sleep(0.05)


_DEFAULT: GpuPool | None = None


def default_pool() -> GpuPool:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = GpuPool()
    return _DEFAULT
