"""Where and how solutions are built, run and measured: six kinds, written only against ``kag.plugin``.

- tolerance ``example-half-aware``: fp32 outputs held to 1e-3, half-precision ones to 2e-2;
- baseline ``example-inference``: eager PyTorch under ``torch.inference_mode()``, a stricter
  eager baseline (no autograd bookkeeping to beat);
- backend ``example-cpu-portable``: C++ kernels built for the compiler's generic target (no
  ``-march=native``), so built objects can be shared between machines of different CPU models;
- sandbox ``example-prefixed``: the agent's commands in a copy of the workspace, each run under a
  prefix of your choice (default ``unshare -rn``: no network), with an empty environment;
- executor ``example-processes``: each job in a process of a pool, so a job that leaks memory or
  crashes the interpreter costs that job only;
- command ``kag example-tolerances``: each tolerance plugin's (atol, rtol) for fp32, fp16 and bf16.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from kag.plugin import (BuildSetupError, CommandResult, ExecutorStats, Job, JobOutcome, call_job, hookimpl,
                        tool_version, torch_info)


class HalfAwareTolerance:
    """(atol, rtol) by dtype: tighter than the paper's 1e-2 for fp32, looser for fp16/bf16."""

    name = "example-half-aware"

    def __init__(self, full: float = 1e-3, half: float = 2e-2):
        self.full, self.half = float(full), float(half)

    def tolerance(self, dtype: Any) -> tuple[float, float]:
        tol = self.half if str(dtype) in ("torch.float16", "torch.bfloat16") else self.full
        return tol, tol


class InferenceModeBaseline:
    """The task's model called under ``torch.inference_mode()``: what a deployed model pays."""

    name = "example-inference"

    def __init__(self, mode: str | None = "default"):
        self.mode = "default"

    def prepare(self, model: Any) -> Callable[..., Any]:
        import torch

        def call(*inputs: Any) -> Any:
            with torch.inference_mode():
                return model(*inputs)
        return call


class PortableCpuBackend:
    """kernels/*.cpp without torch headers, bindings against torch, one shared library; objects for
    the compiler's generic target, so the toolchain id need not name this machine's CPU model."""

    name = "example-cpu-portable"
    device = "cpu"

    def __init__(self, cxx: str | None = None):
        self.cxx = cxx or os.environ.get("CXX", "c++")

    def toolchain_id(self) -> str:
        return f"example-cpu-portable|{tool_version(self.cxx)}|torch {torch_info().version}"

    def source_kind(self, rel: str) -> str:
        if not rel.endswith(".cpp"):
            raise BuildSetupError(f"{rel}: example-cpu-portable builds kernels/*.cpp only")
        return "binding" if rel.endswith("_binding.cpp") else "kernel"

    def compile_command(self, kind: str, source: str, obj: str) -> list[str]:
        flags = ["-O2", "-fopenmp", "-fPIC", "-std=c++17", "-I."]
        if kind == "binding":
            flags += torch_info().compile_flags()
        return [self.cxx, *flags, "-c", source, "-o", obj]

    def link_command(self, objects: list[str], out: str, sources_text: str) -> list[str]:
        return [self.cxx, "-shared", "-fopenmp", *objects, "-o", out, *torch_info().link_flags(),
                "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]


class PrefixedHandle:
    """One episode's copy of the workspace; every command is ``prefix + bash -c CMD`` in it."""

    def __init__(self, root: Path, prefix: list[str], env: dict[str, str], timeout_s: float):
        self.root, self.prefix, self.env, self.timeout_s = root, prefix, env, timeout_s
        self.workdir = str(root)
        self.procs: list[subprocess.Popen] = []

    def path(self, rel: str = "") -> Path:
        return self.root / rel if rel else self.root

    def _popen(self, argv: list[str], cwd: str | None, **kw: Any) -> subprocess.Popen:
        proc = subprocess.Popen(self.prefix + argv, cwd=self.root / (cwd or ""), env=self.env,
                                start_new_session=True, **kw)  # its own group: killed whole
        self.procs.append(proc)
        return proc

    def run(self, cmd: str, timeout: float | None = None, cwd: str | None = None) -> CommandResult:
        start = time.monotonic()
        proc = self._popen(["bash", "-c", cmd], cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=self.timeout_s if timeout is None else timeout)
            return CommandResult(proc.returncode, out, err, elapsed_s=time.monotonic() - start)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return CommandResult(-9, out, err, timed_out=True, elapsed_s=time.monotonic() - start)

    def open_shell(self) -> subprocess.Popen:
        return self._popen(["bash"], None, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, bufsize=0)

    def spawn(self, cmd: str, cwd: str | None = None) -> subprocess.Popen:
        return self._popen(["bash", "-c", cmd], cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, bufsize=0)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()
        shutil.rmtree(self.root.parent, ignore_errors=True)


class PrefixedSandbox:
    """The skeleton of a sandbox around a tool of your own: set ``prefix`` to bwrap, nsjail or an
    ssh to a VM. The default, ``unshare -rn``, only cuts the network: it confines no files."""

    def __init__(self, prefix: list[str] | None = None, timeout_s: float = 600.0):
        self.prefix = list(prefix) if prefix is not None else ["unshare", "-rn"]
        self.timeout_s = float(timeout_s)

    def start(self, workspace_dir: str | Path | None = None, bridge_dir: str | Path | None = None) -> PrefixedHandle:
        root = Path(tempfile.mkdtemp(prefix="kag-example-ws-")) / "workspace"
        if workspace_dir is None:
            root.mkdir()
        else:
            shutil.copytree(workspace_dir, root, symlinks=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "LANG": "C.UTF-8"}
        if bridge_dir:  # how the agent's tools reach the trusted evaluator
            env["KAG_BRIDGE"] = str(Path(bridge_dir) / "eval.sock")
        return PrefixedHandle(root, self.prefix, env, self.timeout_s)


class ProcessSession:
    """Workers held for many ``call(job)``s (an RL stage's environments call from many threads)."""

    def __init__(self, pool: ProcessPoolExecutor, stats: ExecutorStats):
        self.pool, self.stats, self.lock = pool, stats, threading.Lock()

    def call(self, job: Job) -> JobOutcome:
        with self.lock:
            self.stats.jobs += 1
        value, error = self.pool.submit(call_job, job.fn, dict(job.args)).result()
        return JobOutcome(job.key, value, error, worker="example-processes")

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)

    def __enter__(self) -> "ProcessSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ProcessExecutor:
    """Jobs (``"module:function"`` and plain data) in a pool of fresh processes."""

    name = "example-processes"

    def __init__(self) -> None:
        self.stats = ExecutorStats(executor=self.name)

    def session(self, workers: int | None = None, gpu: bool = False) -> ProcessSession:
        self.stats = ExecutorStats(executor=self.name, workers=max(1, workers or 1))
        return ProcessSession(self._pool(), self.stats)

    def _pool(self) -> ProcessPoolExecutor:
        # spawned, not forked: the caller may run threads (kag eval does), and a fork copies their locks
        return ProcessPoolExecutor(self.stats.workers, mp_context=multiprocessing.get_context("spawn"))

    def map_unordered(self, jobs: Iterable[Job], workers: int | None = None, gpu: bool = False) -> Iterator[JobOutcome]:
        self.stats = ExecutorStats(executor=self.name, workers=max(1, workers or 1))
        with self._pool() as pool:
            futures = {pool.submit(call_job, job.fn, dict(job.args)): job for job in jobs}
            self.stats.jobs = len(futures)
            for fut in as_completed(futures):
                value, error = fut.result()
                yield JobOutcome(futures[fut].key, value, error, worker=self.name)


@hookimpl
def kag_register_tolerances(register):
    register("example-half-aware", HalfAwareTolerance)


@hookimpl
def kag_register_baselines(register):
    register("example-inference", InferenceModeBaseline)


@hookimpl
def kag_register_backends(register):
    register("example-cpu-portable", PortableCpuBackend)


@hookimpl
def kag_register_sandboxes(register):
    register("example-prefixed", PrefixedSandbox)


@hookimpl
def kag_register_executors(register):
    register("example-processes", ProcessExecutor)


@hookimpl
def kag_register_commands(cli):
    import click

    @cli.command("example-tolerances")
    def example_tolerances() -> None:
        """Each tolerance plugin's (atol, rtol) for fp32, fp16 and bf16 outputs."""
        import torch

        from kag.plugin import Plugins

        plugins = Plugins()
        for name in sorted(plugins.registry.get("tolerance", {})):
            policy = plugins.create("tolerance", name)
            pairs = [f"{d}={policy.tolerance(getattr(torch, d))}" for d in ("float32", "float16", "bfloat16")]
            click.echo(f"{name}: {' '.join(pairs)}")
