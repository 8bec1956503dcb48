"""Compile a solution into the ``cuda_extension`` module, one cached object per source file.

Backend plugins (cuda, cpu) say which compiler and flags each file needs (the ``Backend``
Protocol of kag.core.contracts); this module owns the rest: content hashing, the object cache,
parallel compiles with timeouts, linking, and trimming compiler output to the lines an agent can
act on. An unchanged file is never compiled twice, and the fixed ``binding.cpp`` object is shared
by every solution built with the same toolchain.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Any, Iterable

import attrs

from kag.core.trust import integrity
from kag.core.contracts import Backend  # the contract; re-exported from here for old imports
from kag.core.eval.orchestrator.pch import TorchPch, with_header
from kag.core.records import Solution
from kag.core.agent.workspace import BINDING_FILES, skill_dir

MODULE_NAME = "cuda_extension"
SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx")
MAX_LOG_LINES = 60


class BuildSetupError(Exception):
    """The toolchain cannot build this solution at all (missing compiler, CPU-only torch, ...)."""


class BuildCacheError(BuildSetupError):
    """The evaluator's own build folder or cache is unusable (disk full, read-only, key unreadable):
    the evaluator's failure, never the solution's."""


EVALUATOR_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


@attrs.define
class BuildResult:
    """The outcome of one build; ``module_dir`` holds ``cuda_extension*.so`` when ``ok``."""

    ok: bool
    module_dir: str | None
    log: str
    seconds: float
    compiled: list[str] = attrs.field(factory=list)
    cached: list[str] = attrs.field(factory=list)
    failed: list[str] = attrs.field(factory=list)
    warnings: list[str] = attrs.field(factory=list)  # cache entries that failed their integrity check
    evaluator_fault: bool = False  # failed for the evaluator's reasons (its disk), not the solution's
    slot_wait_s: float = 0.0  # the compilers' waits for timings on this host's CPU to end (summed over its runs)
    slot_quiet: bool = True  # False: that wait passed its bound and the compilers ran beside a timing


# ---------------------------------------------------------------------------------------------
# the cache and torch facts
def cache_root(cache_dir: Path | str | None = None) -> Path:
    """``cache_dir``, else ``$KAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/kag`` (``~/.cache/kag``)."""
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("KAG_CACHE_DIR"):
        return Path(os.environ["KAG_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kag"


def trusted_stores(cache_dir: Path | str | None = None) -> list[str]:
    """The folders no confined process may read, whatever read rule would cover them: the cache
    (signed objects and baselines, its key) and the precompiled-header store (its own key; a header
    forged there would be compiled into every later binding unit, under keys of clean sources) and
    the operator counter's store (its own key; a library forged there would run in every later
    candidate and baseline runner)."""
    from kag.core.eval.judge import op_counter_lib
    from kag.core.eval.orchestrator import pch

    stores = [str(cache_root(cache_dir))]
    if os.environ.get("KAG_PCH_DIR") != pch.OFF:
        stores.append(str(pch.pch_root()))
    stores.append(str(op_counter_lib.counter_root()))
    return stores


@attrs.frozen
class TorchInfo:
    """What compiling against the installed torch needs; cached on disk so builds skip ``import torch``."""

    version: str
    cuda: str | None
    torch_dir: str
    include_paths: list[str]
    library_paths: list[str]
    python_include: str
    cxx11_abi: int
    cxx_std: str
    extra_defines: list[str]

    def compile_flags(self) -> list[str]:
        flags = [f"-std={self.cxx_std}", f"-D_GLIBCXX_USE_CXX11_ABI={self.cxx11_abi}",
                 f"-DTORCH_EXTENSION_NAME={MODULE_NAME}", "-DTORCH_API_INCLUDE_EXTENSION_H",
                 *self.extra_defines]
        flags += [f"-isystem{p}" for p in self.include_paths] + [f"-isystem{self.python_include}"]
        return flags

    def link_flags(self) -> list[str]:
        out: list[str] = []
        for p in self.library_paths:
            out += [f"-L{p}", f"-Wl,-rpath,{p}"]
        return out


def _probe_torch() -> dict[str, Any]:
    import torch
    import torch.utils.cpp_extension as cpp_ext

    text = Path(cpp_ext.__file__).read_text(encoding="utf-8")
    extra: list[str] = []
    abi_flags = getattr(cpp_ext, "_get_pybind11_abi_build_flags", None)
    if abi_flags is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            extra = [f.replace('\\"', '"') for f in abi_flags()]
    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "torch_dir": str(Path(torch.__file__).parent),
        "include_paths": list(cpp_ext.include_paths()),
        "library_paths": list(cpp_ext.library_paths()),
        "python_include": sysconfig.get_paths()["include"],
        "cxx11_abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
        "cxx_std": "c++20" if "-std=c++20" in text else "c++17",
        "extra_defines": extra,
    }


def cache_key_material(cache: Path) -> bytes:
    """The cache's HMAC key; a cache whose key cannot be kept private is a setup error."""
    try:
        return integrity.load_key(cache)
    except (integrity.IntegrityError, OSError) as exc:
        raise BuildCacheError(f"build cache {cache}: {exc}") from None


@functools.lru_cache(maxsize=None)
def torch_info(cache_dir: str | None = None) -> TorchInfo:
    """Facts about the installed torch, keyed on its location and version file (a signed record:
    its include and library paths go into every compile and link)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise BuildSetupError("torch is not installed; `pip install torch` to build solutions")
    torch_dir = Path(spec.origin).parent
    stamp = (torch_dir / "version.py").read_bytes() if (torch_dir / "version.py").exists() else b""
    key = hashlib.sha256(str(torch_dir).encode() + stamp + sys.version.encode()).hexdigest()[:20]
    root = cache_root(cache_dir)
    store = integrity.SignedStore(root / "toolchain", "toolchain", cache_key_material(root))
    name = f"torch-{key}.json"
    data = store.read(name)
    if data is not None:
        try:
            return TorchInfo(**json.loads(data))
        except (ValueError, TypeError):
            pass
    from kag.core.eval.orchestrator.timing_lock import host_work

    with host_work():  # importing torch: seconds of CPU, not beside a timing on this CPU
        probed = _probe_torch()
    store.write(name, json.dumps(probed, indent=1).encode())
    return TorchInfo(**probed)


@functools.lru_cache(maxsize=None)
def tool_version(tool: str) -> str:
    """``TOOL --version`` (compilers), part of every object's cache key."""
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildSetupError(f"cannot run {tool!r}: {exc}; install it or put it on PATH") from None
    if out.returncode != 0:
        raise BuildSetupError(f"{tool} --version failed: {out.stderr.strip()[:200]}")
    return f"{shutil.which(tool) or tool}: {' '.join(out.stdout.split())}"


# ---------------------------------------------------------------------------------------------
# compiler output
_ERROR_RE = re.compile(r"(^\S[^:\s]*:\d+(:\d+)?:\s*(fatal )?error\b)|(^\S+\(\d+\): (catastrophic )?error\b)"
                       r"|undefined reference|cannot find -l|ld returned|\berror:", re.IGNORECASE)
_CONTEXT_RE = re.compile(r"^\s+(\d+\s*\|| *\||\S)")


def trim_compiler_output(text: str, src_root: Path | str | None = None,
                         max_lines: int = MAX_LOG_LINES) -> str:
    """Keep error lines (file:line: message) and their source snippet; paths relative to the workspace."""
    if src_root is not None:
        text = text.replace(str(src_root).rstrip("/") + "/", "")
    try:
        text = text.replace(torch_info().torch_dir + "/", "<torch>/")
    except BuildSetupError:
        pass
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    kept: list[str] = []
    context = 0
    for ln in lines:
        if _ERROR_RE.search(ln):
            kept.append(ln)
            context = 3
        elif context and _CONTEXT_RE.match(ln) and "note:" not in ln and "warning" not in ln:
            kept.append(ln)
            context -= 1
        else:
            context = 0
    return _cap(kept or lines[-max_lines:], max_lines)


def _cap(lines: list[str], max_lines: int = MAX_LOG_LINES) -> str:
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more lines cut)"]
    return "\n".join(lines)


def _unique() -> str:
    """A temp-file tag unique across processes AND threads (evaluations build concurrently)."""
    return f"{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}"


def confined(cmd: list[str], workdir: Path, cache: Path, hide: Iterable[str] = ()) -> list[str]:
    """``cmd`` run under kag.core.trust.confine_exec: it reads the system and the toolchain but the
    files in ``hide``, reads and writes ``workdir``, and never reaches ``cache`` (the evaluator's key
    and signed entries) or the precompiled-header store (``trusted_stores``). It also reads kag's own
    code (the nvrtc backend's compiler is a kag module; an editable install is not under the system's
    paths), which the candidate may read too."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))
    hidden = [part for path in hide for part in ("--hide", path)]
    protected = [part for store in trusted_stores(cache) for part in ("--protect", store)]
    return [sys.executable, "-m", "kag.core.trust.confine_exec", "--write", str(workdir), *protected,
            "--read", package, *hidden, "--", *cmd]


def hidden_from_build(backend: Backend, cache: Path) -> list[str]:
    """What a backend's compilers must not read: for a CUDA build, NVRTC's files and archives (a wheel
    may hold one), which a solution could otherwise embed in its module (``.incbin``) and load in a
    candidate that has none (kag.core.trust.nvrtc_wall). The nvrtc backend's own compiler (``build_reads_nvrtc``) needs them;
    its sources cannot embed a file (NVRTC has no ``.incbin`` in a CUBIN)."""
    if getattr(backend, "device", "cpu") != "cuda" or getattr(backend, "build_reads_nvrtc", False):
        return []
    from kag.core.trust.fatbin_wall import archive_files, compiler_files

    return compiler_files(str(cache)) + archive_files(str(cache))


def _run_compiler(cmd: list[str], cwd: Path, deadline: float, env: dict[str, str], lock_dir: Path | None,
                  slot: dict[str, Any]) -> Any:
    """One compiler run until the build's ``deadline``, holding the host's slot
    (``timing_lock.host_work``) for that run only, so a timing waits at most one run, never a whole
    build (kag.core.eval.orchestrator.compile_run: whose fault a timeout is)."""
    from kag.core.eval.orchestrator.compile_run import run
    from kag.core.eval.orchestrator.timing_lock import host_work

    from kag.core import timeline

    t0 = time.perf_counter()
    with contextlib.ExitStack() as held:
        with timeline.span("wait: host slot (compile)"):  # the wait is inside the build's limit
            quiet = held.enter_context(host_work(lock_dir, deadline - time.monotonic()))
        with slot["lock"]:
            slot["wait"] = round(slot["wait"] + time.perf_counter() - t0, 3)
            slot["quiet"] = slot["quiet"] and bool(quiet)
        with timeline.span("compile" if "-c" in cmd else "link"):
            return run(cmd, cwd, deadline, env=env)


def tool_env(workdir: Path) -> dict[str, str]:
    """The compilers' environment: the machine's minimal one, temp files in the build folder."""
    from kag.core.trust.isolation import minimal_env

    tmp = workdir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    keep = {k: os.environ[k] for k in ("CXX", "CC", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS") if k in os.environ}
    return minimal_env({**keep, "TMPDIR": str(tmp), "HOME": str(tmp)})


# ---------------------------------------------------------------------------------------------
# the build
@attrs.define
class _Unit:
    rel: str  # path shown to the agent, relative to the workspace
    kind: str
    inputs: dict[str, str] = attrs.field(factory=dict)  # the solution files its compile may read
    key: str = ""
    command: list[str] = attrs.field(factory=list)

    @property
    def obj(self) -> str:
        return f"{self.key}.o"


def _against_torch(command: list[str]) -> bool:
    """Whether ``command`` compiles with torch's flags (a backend's binding does; a test's may not)."""
    try:
        flags = torch_info().compile_flags()
    except BuildSetupError:
        return False
    return all(flag in command for flag in flags)


def _normalise_kernels(kernels: dict[str, str]) -> dict[str, str]:
    """Keys are paths under kernels/ (``foo.cu``); a ``kernels/`` prefix is accepted and dropped."""
    out: dict[str, str] = {}
    for name, text in kernels.items():
        rel = name[len("kernels/"):] if name.startswith("kernels/") else name
        parts = Path(rel).parts
        if not rel or Path(rel).is_absolute() or ".." in parts:
            raise BuildSetupError(f"kernels/{rel}: a kernel file must be a relative path inside kernels/")
        out[rel] = text
    return out


def unit_inputs(rel: str, kernels: dict[str, str]) -> dict[str, str]:
    """The files of kernels/ that compiling ``rel`` may read: itself and what it ``#include``s,
    transitively (kag.core.eval.orchestrator.includes). Only these are in its compile tree and its cache key, so
    the key covers everything the compile can read from the solution, and an edit of a file the
    unit does not include (named in a comment, say) does not recompile it."""
    from kag.core.eval.orchestrator.includes import unit_inputs as included

    return included(rel, kernels)


def _write_tree(src_root: Path, kernels: dict[str, str], fixed: dict[str, bytes]) -> None:
    if src_root.exists():
        shutil.rmtree(src_root)
    (src_root / "kernels").mkdir(parents=True)
    for name, data in fixed.items():
        (src_root / name).write_bytes(data)
    for rel, text in kernels.items():
        dest = src_root / "kernels" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")


def _key(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:32]


def build_solution(solution: Solution, backend: Backend, out_dir: Path, *,
                   cache_dir: Path | None = None, jobs: int | None = None,
                   timeout_s: float = 180, lock_dir: Path | None = None) -> BuildResult:
    """Compile ``solution`` with ``backend`` into ``out_dir/cuda_extension<EXT_SUFFIX>``.

    Never raises for a bad solution: compile errors, a wrong file type or a missing toolchain
    come back as ``BuildResult(ok=False)`` with a short log. On a host without a GPU the compilers
    hold the CPU's timing slot shared (``lock_dir``: its folder), whoever asked for the build (an
    evaluation, ``kag build``, an agent's compile tool), so no timing on this CPU runs beside them.
    """
    start = time.perf_counter()
    deadline = time.monotonic() + timeout_s  # the whole build's, every compiler run and wait included
    out_dir = Path(out_dir).resolve()
    suffix = getattr(backend, "module_suffix", None) or sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    module_path = out_dir / f"{MODULE_NAME}{suffix}"
    for stale in out_dir.glob(f"{MODULE_NAME}*"):  # a failed build must not leave an old module
        stale.unlink()
    try:
        return _build(solution, backend, out_dir, module_path, cache_root(cache_dir).resolve(),
                      jobs or os.cpu_count() or 1, timeout_s, deadline, start, lock_dir)
    except BuildCacheError as exc:
        return BuildResult(False, None, f"the evaluator could not build: {exc}", time.perf_counter() - start,
                           evaluator_fault=True)
    except BuildSetupError as exc:
        return BuildResult(False, None, str(exc), time.perf_counter() - start)
    except OSError as exc:
        if exc.errno not in EVALUATOR_ERRNOS:
            raise
        return BuildResult(False, None, f"the evaluator could not build: {out_dir} or its cache: {exc}",
                           time.perf_counter() - start, evaluator_fault=True)


def _build(solution: Solution, backend: Backend, out_dir: Path, module_path: Path, cache: Path,
           jobs: int, timeout_s: float, deadline: float, start: float, lock_dir: Path | None = None) -> BuildResult:
    kernels = _normalise_kernels(solution.kernels)
    fixed = {name: (skill_dir() / name).read_bytes() for name in BINDING_FILES}
    src_root, staged = out_dir / "src", out_dir / "objects"
    for folder in (src_root, staged):
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    hide = hidden_from_build(backend, cache)
    toolchain = backend.toolchain_id() + ("|reads no NVRTC" if hide else "")  # an object built before may hold it
    mac_key = cache_key_material(cache)
    objects = integrity.SignedStore(cache / "objects", "object", mac_key)
    modules = integrity.SignedStore(cache / "modules", "module", mac_key)
    failures = integrity.SignedStore(cache / "failures", "failure", mac_key)  # compile errors, by unit
    units = [_Unit(name, "binding") for name in getattr(backend, "fixed_units", ("binding.cpp",))]
    for rel in sorted(kernels):
        if rel.endswith(SOURCE_SUFFIXES):
            units.append(_Unit(f"kernels/{rel}", backend.source_kind(f"kernels/{rel}"), unit_inputs(rel, kernels)))
    for unit in units:
        unit.command = backend.compile_command(unit.kind, unit.rel, "{obj}")
        if unit.kind == "binding" and _against_torch(unit.command):  # torch's headers precompiled (kag.core.eval.orchestrator.pch)
            unit.command = with_header(unit.command)
        unit.key = _key(toolchain, unit.kind, "\0".join(unit.command), *fixed.values(),
                        *[f"{rel}\0{text}" for rel, text in unit.inputs.items()])
    sources_text = "\n".join(kernels.values())
    link_error = None
    try:
        link_cmd = backend.link_command(["{obj%d}" % i for i in range(len(units))], "{out}", sources_text)
        linked_name = _key(toolchain, "\0".join(link_cmd), *[u.key for u in units]) + module_path.suffix
    except BuildSetupError as exc:  # reported after any compile errors
        link_error, link_cmd, linked_name = str(exc), [], ""

    # the compilers' waits for the host's timings, summed over the runs (threads: one lock)
    slot: dict[str, Any] = {"wait": 0.0, "quiet": True, "lock": threading.Lock()}

    def done(ok: bool, log: str, evaluator_fault: bool = False, **lists: list[str]) -> BuildResult:
        warnings = [f"warning: the cached {name} failed its integrity check; ignored and rebuilt"
                    for name in dict.fromkeys(objects.rejected + modules.rejected + failures.rejected)]
        log = "\n".join(filter(None, [log, *warnings]))
        return BuildResult(ok, str(out_dir) if ok else None, log, time.perf_counter() - start, warnings=warnings,
                           slot_wait_s=slot["wait"], slot_quiet=slot["quiet"], evaluator_fault=evaluator_fault, **lists)

    module = modules.read(linked_name) if linked_name else None
    if module is not None:  # the whole module is cached: no object is needed
        _install(module, module_path)
        return done(True, "", cached=[u.rel for u in units])

    todo: list[_Unit] = []
    cached: list[str] = []
    for unit in units:
        data = objects.read(unit.obj)
        if data is None:
            todo.append(unit)
        else:  # the verified bytes, not the cache's file, go to the linker
            (staged / unit.obj).write_bytes(data)
            cached.append(unit.rel)

    from kag.core import timeline

    lane = timeline.lane()  # the pool's threads draw in the caller's lane
    from kag.core.eval.orchestrator.timing_lock import host_work

    pch = TorchPch(out_dir, lambda cmd, cwd: _run_compiler(
        confined(cmd, out_dir, cache, hide), cwd, deadline, tool_env(out_dir), lock_dir, slot),
        host=lambda: host_work(lock_dir, deadline - time.monotonic()))

    def compile_one(index: int, unit: _Unit) -> tuple[_Unit, Any]:
        from kag.core.eval.orchestrator.compile_run import RunOutcome, one_compile, remember_failure, remembered_failure

        obj = staged / unit.obj
        with timeline.in_lane(lane), one_compile(cache, unit.obj, deadline) as mine:
            if not mine:  # another build of the same unit held it past our deadline
                return unit, RunOutcome(-1, "waited for the same file's compile in another build", timed_out=True,
                                        starved=True)
            data = objects.read(unit.obj)  # built meanwhile by another build
            if data is not None:
                obj.write_bytes(data)
                return unit, RunOutcome(0, "")
            known = remembered_failure(failures, unit.obj, deadline - time.monotonic())
            if known is not None:
                return unit, known
            tree = src_root / f"unit{index}"
            _write_tree(tree, unit.inputs, fixed)
            pch.place(unit.command, tree, deadline)
            outcome = _run_compiler(confined([str(obj) if part == "{obj}" else part for part in unit.command], out_dir,
                                             cache, hide), tree, deadline, tool_env(out_dir), lock_dir, slot)
            if outcome.ok and obj.exists():
                objects.write(unit.obj, obj.read_bytes())
                return unit, outcome
            obj.unlink(missing_ok=True)
            if not outcome.timed_out:
                outcome.out = trim_compiler_output(outcome.out, tree)
            remember_failure(failures, unit.obj, outcome)
            return unit, outcome

    failed: list[tuple[str, str]] = []
    starved: list[str] = []
    with contextlib.closing(pch), \
            concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(jobs, len(todo) or 1))) as pool:
        for unit, outcome in pool.map(compile_one, range(len(todo)), todo):
            if outcome.starved:
                starved.append(f"{unit.rel}: the compile {outcome.out}: this machine was too busy (the "
                               f"evaluator's failure, not the solution's)")
            elif outcome.timed_out:
                failed.append((unit.rel, f"{unit.rel}: error: compile {outcome.out}: the build's limit is "
                                         f"{timeout_s:g} s in all (EvalOptions.timeouts.build_s, `kag score "
                                         f"--build-timeout`); simplify the file or split it"))
            elif outcome.rc != 0:
                failed.append((unit.rel, outcome.out))
    compiled = [u.rel for u in todo]
    if starved:
        return done(False, _cap(starved), compiled=[c for c in compiled if c not in starved], cached=cached,
                    failed=[line.split(":", 1)[0] for line in starved], evaluator_fault=True)
    if failed:
        lines = "\n".join(msg or f"{rel}: compile failed with no message" for rel, msg in failed)
        return done(False, _cap(lines.splitlines()), compiled=[c for c in compiled if c not in dict(failed)],
                    cached=cached, failed=[rel for rel, _ in failed])
    if link_error is not None:
        return done(False, link_error, compiled=compiled, cached=cached)

    tmp = out_dir / f".link-{_unique()}{module_path.suffix}"
    subst = {f"{{obj{i}}}": str(staged / u.obj) for i, u in enumerate(units)} | {"{out}": str(tmp)}
    linked = _run_compiler(confined([subst.get(p, p) for p in link_cmd], out_dir, cache, hide), src_root, deadline,
                           tool_env(out_dir), lock_dir, slot)
    if not linked.ok or not tmp.exists():
        tmp.unlink(missing_ok=True)
        msg = f"link {linked.out}" if linked.timed_out else trim_compiler_output(linked.out, src_root)
        return done(False, "link failed:\n" + msg, compiled=compiled, cached=cached,
                    evaluator_fault=linked.starved)
    module = tmp.read_bytes()
    tmp.unlink()
    modules.write(linked_name, module)
    _install(module, module_path)
    return done(True, "", compiled=compiled, cached=cached)


def _install(module: bytes, module_path: Path) -> None:
    """Write the (verified or freshly linked) module's bytes as ``cuda_extension*.so``."""
    module_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = module_path.with_name(f".{module_path.name}.{_unique()}")
    tmp.write_bytes(module)
    os.replace(tmp, module_path)
