"""Evaluation containers of the docker sandbox: the host side (trusted).

In a docker episode no solution code runs on the host. Each build and each evaluation of the
episode runs in a fresh container of the sandbox image, started with the docker SDK:

- **What is mounted, all read-only at the same paths as on the host:** the toolchain (``/usr``
  by default: compilers, binutils, system libraries, nvcc under /usr/local), ``/etc/ld.so.cache``
  and ``/etc/alternatives`` (how ``c++`` resolves), the Python installation (``sys.prefix`` and
  ``sys.base_prefix``: torch and every library), kag's package folder, ``$CUDA_HOME`` when it
  lies outside /usr, and ``extra_mounts``. Same paths, so the build cache's keys (compiler and
  torch paths) match and nothing is relocated. Their parent folders come from a skeleton of empty
  folders, so e.g. /root shows only the mounted Python, never the rest of the host's /root.
  Nothing else of the host is visible: no /home, /root, /tmp, /work, /etc beyond the two entries
  above. Limits of this choice: a solution can read the toolchain, the Python installation and
  kag's code (public software, the same on every machine of a run), so an error text quoting a
  file can quote only those; anything private a site keeps under /usr or in the Python
  installation would be readable too (narrow ``toolchain`` then).
- **A build container** compiles with ``kag.core.eval.orchestrator.build`` (no solution code runs in it; the
  compiler runs on the agent's sources there, so an ``#include`` of a host file finds nothing)
  into the episode's build cache, the only read-write mount. It is seeded per backend from a
  cache built once per sandbox from the fixed files alone, so an episode's first build does not
  recompile ``binding.cpp``.
- **An evaluation container** runs ``kag.core.eval.orchestrator.evaluate.evaluate`` (guards, build, judge, candidate,
  reward) with the episode's build cache read-only (its build is all cache hits) and the
  baseline timings read-only; it writes only to its tmpfs /tmp and /dev/shm, has no network, no
  capabilities, no-new-privileges, memory, pids and (optionally) CPU limits, and with the cuda
  backend gets the one GPU the host's pool lent it through a device request.
- **How the verdict comes back:** see ``docker_inside``: one line ``KAG-RESULT <token> <json>`` on
  the container's stdout, which only the container's first process holds (non-dumpable, PID 1);
  the token is fresh per container and travels on its stdin. The host reads the attach stream,
  believes only the line with its token, and rebuilds the ``EvalResult`` from it.
- **Baseline timings** measured in a container come back inside the verdict (the judge times them
  before any solution code is imported) and the host, the only writer, adds them to the sandbox's
  ``baselines.json``, which later evaluation containers read.

What still runs on the host: the static guards (text checks of the solution) before a build, and
the reference analysis that ``profile`` gives for the untouched starter (task code, trusted).
Limits: inside an evaluation container the judge and the candidate share a user, so what keeps the
candidate from the judge is what keeps it there on the host (the candidate's own confinement),
the container adding only that neither can reach the host; the GPU path (device requests with
/usr mounted read-only) is untested here (no GPU and no NVIDIA container toolkit on the CI host).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import attrs

from kag.plugin import (BuildResult, EvalOptions, EvalResult, Plugins, Solution, Task, backend_device, from_dict,
                        guard_options, needs_build, static_violations, to_dict)
from kag.plugins.sandboxes.docker_inside import BASELINES_RO, CACHE_RO
from kag.plugins.sandboxes.docker_run import (
    START_MARGIN_S,
    ContainerOutcome,
    EvalContainerConfig,
    bind,
    host_mounts,
    plugin_spec,
    run_container,
    skeleton,
)


def _finish(result: EvalResult, options: EvalOptions, plugins: Plugins, start: float) -> EvalResult:
    """Reward and total time of a verdict made here (a failed build, a container without a result)."""
    from kag.plugin import (
        finish_verdict as finish,  # the same ending as every other verdict
    )

    return finish(result, plugins, options, start)


def judge_budget_s(options: EvalOptions) -> float:
    """The longest an evaluation may take: the build plus the judge's own overall deadline."""
    t = options.timeouts
    return (t.build_s + t.baseline_s * max(1, len(options.baselines)) + 2 * t.load_s
            + options.num_checks * t.check_s + t.timing_s + 120.0 + START_MARGIN_S)


def memory_bytes(limit: str) -> int:
    from docker.utils import parse_bytes

    return int(parse_bytes(limit))


class EvalState:
    """What every episode of one ``DockerSandbox`` shares: the seed build caches (the fixed files
    compiled once per backend) and the baseline timings. This process and build containers (where
    no solution code runs) are their only writers; evaluation containers see them read-only."""

    def __init__(self, config: EvalContainerConfig):
        self.config = config
        self.dir = Path(tempfile.mkdtemp(prefix="kag-docker-eval-"))  # 0700: no other host user gets in
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.dir), True)
        self.baselines = self.dir / "baselines"
        self.baselines.mkdir(mode=0o755)
        self.paths = host_mounts(config)
        self.skeleton = skeleton(self.dir / "skeleton", self.paths)
        self._seed_lock = threading.Lock()
        self._seeds: dict[str, Path] = {}

    def mounts(self) -> list[Any]:
        """The read-only toolchain mounts of every container, skeleton folders first."""
        return [bind(host, target) for host, target in self.skeleton.items()] + [bind(p, p) for p in self.paths]

    def build_in(self, cache: Path, solution: Solution, backend: str, timeout_s: float,
                 plugins: Plugins) -> ContainerOutcome:
        """A build container compiling ``solution`` into ``cache`` (its only writable mount)."""
        request = {"action": "build", "solution": to_dict(solution), "backend": backend, "timeout_s": timeout_s,
                   "plugins": plugin_spec(plugins)}
        mounts = self.mounts() + [bind(cache, CACHE_RO, read_only=False)]
        return run_container(self.config, request, mounts, timeout_s + START_MARGIN_S)

    def seed(self, backend: str, timeout_s: float, plugins: Plugins) -> Path:
        """The fixed part (binding.cpp) compiled once per backend, in a build container."""
        with self._seed_lock:
            if backend not in self._seeds:
                cache = self.dir / f"seed-{backend}"
                cache.mkdir()
                os.chmod(cache, 0o777)  # the container's user writes it
                self.build_in(cache, Solution(model_new=""), backend, timeout_s, plugins)  # a failure: no seed
                self._seeds[backend] = cache
            return self._seeds[backend]

    def record_baselines(self, task: Task, options: EvalOptions, result: EvalResult) -> None:
        """Keep the baselines a container had to time (the judge times them before any solution code
        is imported, and the verdict's channel cannot be forged), for the next evaluations."""
        from kag.plugin import BaselineCache, baseline_key

        status = result.metadata.get("baseline_cache") or {}
        device = result.device or {}
        if not device.get("name") or result.metadata.get("judge_error"):
            return
        for name in options.baselines:
            info = status.get(name) if isinstance(status.get(name), dict) else {}
            # timed in the container and settled (its judge cannot write the mounted cache: not cached)
            if info.get("status") == "miss" and not info.get("cached") and name in result.timing:
                key = baseline_key(task.code_hash, device, str(device.get("torch")), name, options.baseline_mode(name),
                                   options.num_timed)
                BaselineCache(self.baselines).put(key, result.timing[name])
                os.chmod(self.baselines / "baselines.json", 0o644)  # written 0600; containers read it


class ContainerEvaluator:
    """One episode's builds and evaluations, each in a fresh container; usable until it is garbage
    collected (an episode's final re-score runs after its agent container is gone)."""

    def __init__(self, state: EvalState):
        self.state = state
        self.dir = Path(tempfile.mkdtemp(prefix="episode-", dir=state.dir))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.dir), True)
        self._lock = threading.Lock()

    def cache(self, backend: str, timeout_s: float, plugins: Plugins) -> Path:
        """The episode's build cache for ``backend``: a copy of the seed, then its own builds."""
        cache = self.dir / f"cache-{backend}"
        with self._lock:
            if not cache.exists():
                tmp = self.dir / f".cache-{backend}.tmp"
                seed = self.state.seed(backend, timeout_s, plugins)
                shutil.copytree(seed, tmp)
                owner = os.stat(seed / "private") if (seed / "private").is_dir() else None
                for path in [tmp, *tmp.rglob("*")]:
                    if path.is_dir() and path.name != "private":
                        os.chmod(path, 0o777)
                    if owner is not None and not path.is_symlink():  # the container's user made the seed, and
                        os.chown(path, owner.st_uid, owner.st_gid)  # keeps its private key in the copy
                tmp.rename(cache)
        return cache

    def close(self) -> None:
        """Remove the episode's build cache now (also done when this object is collected)."""
        self._finalizer()

    def build(self, solution: Solution, options: EvalOptions, plugins: Plugins) -> BuildResult:
        """Compile in a build container into the episode's cache (what ``compile.sh`` asks for)."""
        start = time.perf_counter()
        timeout_s = options.timeouts.build_s
        outcome = self.state.build_in(self.cache(options.backend, timeout_s, plugins), solution, options.backend,
                                      timeout_s, plugins)
        payload = outcome.payload
        if payload is not None and payload.get("ok"):
            try:
                return BuildResult(**dict(payload["value"], module_dir=None))  # a path inside the container
            except TypeError:
                pass
        reason = payload.get("error") if payload else outcome.describe()
        return BuildResult(False, None, f"the build container failed: {reason}", time.perf_counter() - start)

    def evaluate(self, task: Task, solution: Solution, options: EvalOptions | None = None,
                 plugins: Plugins | None = None, pool: Any = None) -> EvalResult:
        """``kag.core.eval.orchestrator.evaluate.evaluate`` in an evaluation container; never raises for the solution."""
        from kag.plugin import default_pool

        options = options or EvalOptions()
        plugins = plugins or Plugins()
        start = time.perf_counter()
        violations, _ = static_violations(task, solution, plugins, options.guards, guard_options(options, plugins))
        cache = None  # no build, no cache: a guard's verdict or a solution without kernels
        if not violations and needs_build(solution):
            cache = self.cache(options.backend, options.timeouts.build_s, plugins)
            built = self.build(solution, options, plugins)
            if not built.ok:  # the verdict evaluate() would give, without a second, identical build
                result = EvalResult(task=task.name, backend=options.backend, build_log=built.log,
                                    error_kind="build", error=f"build failed:\n{built.log}".strip(),
                                    durations_s={"build": round(built.seconds, 3)})
                if solution.ignored_files:
                    result.metadata["ignored_files"] = list(solution.ignored_files)
                return _finish(result, options, plugins, start)
        limit = memory_bytes(self.state.config.memory) / 2 / 2**30
        inner = attrs.evolve(options, host_memory_gb=min(options.host_memory_gb or limit, limit))
        request = {"action": "evaluate", "task": to_dict(task), "solution": to_dict(solution),
                   "options": to_dict(inner), "plugins": plugin_spec(plugins)}
        mounts = self.state.mounts() + [bind(self.state.baselines, BASELINES_RO)]
        mounts += [bind(cache, CACHE_RO)] if cache is not None else []
        device = backend_device(options.backend, plugins)
        with (pool or default_pool()).acquire("cpu" if device == "cpu" else "cuda") as slot:
            outcome = run_container(self.state.config, request, mounts, judge_budget_s(options),
                                    gpu_request(slot.visible) if device != "cpu" else None)
        result = self._result(task, options, plugins, outcome, start)
        self.state.record_baselines(task, options, result)
        return result

    def _result(self, task: Task, options: EvalOptions, plugins: Plugins, outcome: ContainerOutcome,
                start: float) -> EvalResult:
        payload = outcome.payload
        if payload is not None and payload.get("ok"):
            try:
                result = from_dict(EvalResult, payload["value"])
                result.durations_s["container_total"] = round(time.perf_counter() - start, 3)
                return result
            except (TypeError, ValueError) as exc:
                reason = f"the evaluation container's result is malformed: {exc}"
        else:
            reason = f"the evaluator failed in its container: {payload.get('error')}" if payload else outcome.describe()
        result = EvalResult(task=task.name, backend=options.backend, error=reason,
                            error_kind="timeout" if outcome.timed_out else "exception", metadata={"judge_error": True})
        return _finish(result, options, plugins, start)


def gpu_request(visible: str | None) -> list[Any]:
    """The one GPU the pool lent, through the daemon's GPU support (the NVIDIA container toolkit)."""
    import docker

    return [docker.types.DeviceRequest(device_ids=[visible] if visible else None, count=None if visible else 1,
                                       capabilities=[["gpu"]])]
