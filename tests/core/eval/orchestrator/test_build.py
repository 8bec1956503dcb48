"""The build: real compilers, a real torch extension imported in a subprocess, the object cache.

The CPU backend is built end to end (what CI runs); CUDA sources are compiled with nvcc when it
is present, and linked and run only on a GPU machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kag.core.eval.orchestrator.build import BuildResult, build_solution, trim_compiler_output
from kag.core.records import Solution
from kag.core.agent.workspace import make_workspace, write_solution
from kag.core.records import Task
from kag.plugins.backends.cpu import CpuBackend
from tests.conftest import run_kag

RELU_CPP = """#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
LEAKY_CPP = RELU_CPP.replace("0.f;\n}", "0.1f * x[i];\n}")
RELU_BINDING = """#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "../binding_registry.h"

extern "C" void relu_forward(const float* x, float* y, int64_t n);

torch::Tensor relu(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "relu: contiguous float32 only");
  auto y = torch::empty_like(x);
  relu_forward(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

void relu_bind(pybind11::module& m) { m.def("relu", &relu, "elementwise max(x, 0)"); }
REGISTER_BINDING(relu, relu_bind);
"""
MODEL_NEW = "import torch\nimport cuda_extension\n"


def relu_solution(kernel: str = RELU_CPP) -> Solution:
    return Solution(model_new=MODEL_NEW, kernels={"relu.cpp": kernel, "relu_binding.cpp": RELU_BINDING})


def call_relu(module_dir: str, slope: float = 0.0) -> None:
    """Import the built module in a fresh process and check it against torch."""
    code = ("import sys, torch; sys.path.insert(0, sys.argv[1]); import cuda_extension\n"
            "x = torch.randn(1000)\n"
            f"ref = torch.where(x > 0, x, x * {slope})\n"
            "assert torch.allclose(cuda_extension.relu(x), ref), 'wrong result'\n"
            "print('OK')\n")
    proc = subprocess.run([sys.executable, "-c", code, module_dir], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("kag-cache")


@pytest.fixture(scope="module")
def cold(cache, tmp_path_factory) -> BuildResult:
    result = build_solution(relu_solution(), CpuBackend(), tmp_path_factory.mktemp("cold"), cache_dir=cache)
    print(f"\n[kag build cpu] cold build: {result.seconds:.2f} s, compiled {result.compiled}")
    return result


@pytest.mark.slow
def test_cpu_build_imports_and_runs(cold: BuildResult) -> None:
    assert cold.ok, cold.log
    assert sorted(cold.compiled) == ["binding.cpp", "kernels/relu.cpp", "kernels/relu_binding.cpp"]
    assert cold.cached == []
    assert list(Path(cold.module_dir).glob("cuda_extension*.so"))
    call_relu(cold.module_dir)


@pytest.mark.slow
def test_unchanged_rebuild_compiles_nothing(cold: BuildResult, cache: Path, tmp_path: Path) -> None:
    assert cold.ok, cold.log
    warm = build_solution(relu_solution(), CpuBackend(), tmp_path, cache_dir=cache)
    print(f"\n[kag build cpu] warm (unchanged) rebuild: {warm.seconds:.3f} s vs cold {cold.seconds:.2f} s")
    assert warm.ok and warm.compiled == []
    assert sorted(warm.cached) == sorted(cold.compiled)
    call_relu(warm.module_dir)


@pytest.mark.slow
def test_editing_one_kernel_recompiles_only_it(cold: BuildResult, cache: Path, tmp_path: Path) -> None:
    assert cold.ok, cold.log
    edited = build_solution(relu_solution(LEAKY_CPP), CpuBackend(), tmp_path, cache_dir=cache)
    print(f"\n[kag build cpu] rebuild after editing kernels/relu.cpp: {edited.seconds:.2f} s "
          f"vs cold {cold.seconds:.2f} s")
    assert edited.ok, edited.log
    assert edited.compiled == ["kernels/relu.cpp"]
    assert sorted(edited.cached) == ["binding.cpp", "kernels/relu_binding.cpp"]
    call_relu(edited.module_dir, slope=0.1)


@pytest.mark.slow
def test_compile_error_is_trimmed_and_removes_old_module(cold: BuildResult, cache: Path, tmp_path: Path) -> None:
    assert cold.ok, cold.log
    assert build_solution(relu_solution(), CpuBackend(), tmp_path, cache_dir=cache).ok
    broken = RELU_CPP.replace("y[i] = x[i]", "y[i] = undefined_name + x[i]")
    result = build_solution(relu_solution(broken), CpuBackend(), tmp_path, cache_dir=cache)
    assert not result.ok and result.module_dir is None
    assert result.failed == ["kernels/relu.cpp"]
    assert "kernels/relu.cpp:4:" in result.log and "undefined_name" in result.log
    assert "Traceback" not in result.log and str(tmp_path) not in result.log
    assert len(result.log.splitlines()) <= 61
    assert not list(tmp_path.glob("cuda_extension*")), "a failed build must not leave the old module"


def test_cu_file_on_cpu_backend_is_a_clear_failure(tmp_path: Path) -> None:
    sol = Solution(model_new=MODEL_NEW, kernels={"relu.cu": "__global__ void k() {}\n"})
    result = build_solution(sol, CpuBackend(), tmp_path / "out", cache_dir=tmp_path / "cache")
    assert not result.ok
    assert "kernels/relu.cu" in result.log and "--backend cuda" in result.log


def test_an_unusable_cache_is_the_evaluators_failure_not_the_solutions(tmp_path: Path) -> None:
    """The cache's disk full or unusable (here: a file where the cache folder should be) fails the
    build, but as the evaluator's fault, so a correct solution is not charged with it."""
    sol = Solution(model_new=MODEL_NEW, kernels={"relu.cpp": RELU_CPP})
    (tmp_path / "cache").write_text("not a folder")
    result = build_solution(sol, CpuBackend(), tmp_path / "out", cache_dir=tmp_path / "cache")
    assert not result.ok and result.evaluator_fault and "the evaluator could not build" in result.log
    bad = build_solution(Solution(model_new=MODEL_NEW, kernels={"relu.cu": "x"}), CpuBackend(), tmp_path / "o2",
                         cache_dir=tmp_path / "cache2")
    assert not bad.ok and not bad.evaluator_fault  # the solution's own problem stays the solution's


def test_path_outside_kernels_is_rejected(tmp_path: Path) -> None:
    sol = Solution(model_new=MODEL_NEW, kernels={"../evil.cpp": "int x;\n"})
    result = build_solution(sol, CpuBackend(), tmp_path / "out", cache_dir=tmp_path / "cache")
    assert not result.ok and "inside kernels/" in result.log


def test_compile_timeout_is_reported(tmp_path: Path) -> None:
    kernel = f"// {uuid.uuid4()}\n" + RELU_CPP  # never cached
    sol = Solution(model_new=MODEL_NEW, kernels={"relu.cpp": kernel})
    result = build_solution(sol, CpuBackend(), tmp_path / "out", cache_dir=tmp_path / "cache", timeout_s=0.001)
    assert not result.ok and "kernels/relu.cpp" in result.failed
    assert "kernels/relu.cpp" in result.log and "timed out" in result.log
    # a compiler that had no time at all got no CPU either: the evaluator's failure, not the solution's
    assert result.evaluator_fault and "too busy" in result.log
    assert not list((tmp_path / "cache" / "objects").glob("*.o"))


ENDLESS = """
template <int N> struct Deep { static constexpr long value = Deep<N - 1>::value + Deep<N - 2>::value; };
template <> struct Deep<1> { static constexpr long value = 1; };
template <> struct Deep<0> { static constexpr long value = 0; };
long deep() { return Deep<%d>::value; }
"""


def test_the_build_limit_is_a_total_and_a_busy_compile_bomb_is_the_solutions(tmp_path: Path) -> None:
    """Two files that each compile past the limit: the whole build ends at the limit (not twice it),
    and a compiler that ran flat out until then is the solution's fault."""
    import time

    kernels = {f"bomb{i}.cpp": f"// {uuid.uuid4()}\n" + ENDLESS % 100000 for i in range(2)}
    sol = Solution(model_new=MODEL_NEW, kernels={**kernels, "relu.cpp": RELU_CPP})
    t0 = time.monotonic()
    result = build_solution(sol, CpuBackend(), tmp_path / "out", cache_dir=tmp_path / "cache", timeout_s=4, jobs=1)
    took = time.monotonic() - t0
    assert not result.ok and took < 4 + 3, took  # the limit, plus killing and reaping
    assert "the build's limit is 4 s in all" in result.log or result.evaluator_fault, result.log


def test_identical_compile_units_are_compiled_once_across_builds(tmp_path: Path) -> None:
    """Eight submissions of one new solution at once (an RL batch): one compile of each file; the
    others wait for it and take its object (or its error)."""
    import concurrent.futures

    kernel = f"// {uuid.uuid4()}\n" + RELU_CPP
    sol = Solution(model_new=MODEL_NEW, kernels={"relu.cpp": kernel})
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: build_solution(sol, CpuBackend(), tmp_path / f"out{i}",
                                                         cache_dir=tmp_path / "cache"), range(4)))
    assert all(r.ok for r in results), [r.log for r in results]
    assert sum("kernels/relu.cpp" in r.compiled for r in results) >= 1
    broken = Solution(model_new=MODEL_NEW, kernels={"relu.cpp": f"// {uuid.uuid4()}\nthis is not C++;\n"})
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        failed = list(pool.map(lambda i: build_solution(broken, CpuBackend(), tmp_path / f"bad{i}",
                                                        cache_dir=tmp_path / "cache"), range(4)))
    assert all(not r.ok and not r.evaluator_fault and "relu.cpp" in r.log for r in failed), [r.log for r in failed]
    assert len({r.log.splitlines()[0] for r in failed}) == 1  # the one compile's error, every time
    assert list((tmp_path / "cache" / "failures").iterdir())


def test_trim_keeps_errors_with_relative_paths() -> None:
    root = "/tmp/build-123/src"
    gcc = (f"In file included from {root}/kernels/a_binding.cpp:1:\n"
           f"{root}/kernels/a.h:3:5: warning: unused variable 'q'\n"
           f"{root}/kernels/a.cpp: In function 'void f()':\n"
           f"{root}/kernels/a.cpp:7:3: error: 'foo' was not declared in this scope\n"
           "    7 |   foo();\n      |   ^~~\n"
           f"{root}/kernels/a.cpp:9:1: note: suggested alternative\n")
    nvcc = (f"{root}/kernels/k.cu(12): error: identifier \"bar\" is undefined\n"
            "      bar = 1;\n      ^\n\n1 error detected in the compilation of \"kernels/k.cu\".\n")
    out = trim_compiler_output(gcc + nvcc, root)
    assert out.splitlines() == [
        "kernels/a.cpp:7:3: error: 'foo' was not declared in this scope", "    7 |   foo();",
        "      |   ^~~", 'kernels/k.cu(12): error: identifier "bar" is undefined', "      bar = 1;", "      ^"]
    many = "\n".join(f"kernels/a.cpp:{i}:1: error: e{i}" for i in range(200))
    capped = trim_compiler_output(many).splitlines()
    assert len(capped) == 61 and capped[-1].startswith("... (140 more lines cut)")
    assert trim_compiler_output("ld: something odd happened\n") == "ld: something odd happened"


# -- the CLI and the workspace script -----------------------------------------------------------
@pytest.fixture
def cpu_workspace(tmp_path: Path, kernelbench_path: Path) -> Path:
    task_file = kernelbench_path / "level1" / "19_ReLU.py"
    task = Task(name="19_ReLU", source="local", code=task_file.read_text(), path=str(task_file))
    ws = make_workspace(task, tmp_path / "ws", backend="cpu")
    write_solution(relu_solution(), ws)
    return ws


@pytest.mark.slow
def test_compile_sh_reports_cached_build(cold: BuildResult, cache: Path, cpu_workspace: Path) -> None:
    assert cold.ok, cold.log
    env = dict(os.environ, KAG_CACHE_DIR=str(cache), KAG_PYTHON=sys.executable)
    start = time.perf_counter()
    proc = subprocess.run(["bash", "utils/compile.sh"], cwd=cpu_workspace, capture_output=True, text=True,
                          env=env, timeout=300)
    print(f"\n[kag build cpu] bash utils/compile.sh, all cached: {time.perf_counter() - start:.2f} s wall")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "build ok (cpu)" in proc.stdout and "0 compiled, 3 cached" in proc.stdout
    assert list((cpu_workspace / ".kag" / "build").glob("cuda_extension*.so"))


@pytest.mark.slow
def test_kag_build_cli_reports_errors_and_exit_1(cold: BuildResult, cache: Path, cpu_workspace: Path) -> None:
    assert cold.ok, cold.log
    (cpu_workspace / "kernels" / "relu.cpp").write_text(RELU_CPP.replace("int64_t n)", "int64_t n"))
    proc = run_kag("build", str(cpu_workspace), env={"KAG_CACHE_DIR": str(cache)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "build FAILED (cpu)" in proc.stdout and "kernels/relu.cpp:2:" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_kag_build_cli_bad_input_exit_2(tmp_path: Path) -> None:
    proc = run_kag("build", str(tmp_path))
    assert proc.returncode == 2 and "model_new.py not found" in proc.stderr
    (tmp_path / "model_new.py").write_text(MODEL_NEW)
    proc = run_kag("build", str(tmp_path), "--backend", "tpu")
    assert proc.returncode == 2 and "unknown backend 'tpu'" in proc.stderr and "cpu" in proc.stderr


def test_kag_build_cli_refuses_a_linked_build_folder(tmp_path: Path) -> None:
    """``kag build DIR`` writes DIR/.kag/build: if that is a link out, nothing there is touched."""
    host = tmp_path / "host"
    (host / "src").mkdir(parents=True)
    (host / "src" / "keep.txt").write_text("keep")
    (host / "cuda_extension.so").write_text("host file")
    ws = tmp_path / "ws"
    (ws / ".kag").mkdir(parents=True)
    (ws / "model_new.py").write_text(MODEL_NEW)
    (ws / ".kag" / "build").symlink_to(host)
    proc = run_kag("build", str(ws), "--backend", "cpu")
    assert proc.returncode == 2 and ".kag/build is a symbolic link: links are not allowed" in proc.stderr, \
        proc.stdout + proc.stderr
    assert sorted(p.name for p in host.iterdir()) == ["cuda_extension.so", "src"]
    assert (host / "src" / "keep.txt").read_text() == "keep"


@pytest.mark.slow
def test_concurrent_builds_of_one_solution_share_the_cache_safely(cold: BuildResult, cache: Path,
                                                                 tmp_path: Path) -> None:
    """Evaluations in threads of one process build the same new solution at once (kag eval)."""
    import concurrent.futures

    assert cold.ok, cold.log
    kernel = LEAKY_CPP.replace("0.1f", "0.25f") if "0.1f" in LEAKY_CPP else LEAKY_CPP + "\n// variant\n"
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: build_solution(relu_solution(kernel), CpuBackend(), tmp_path / str(i),
                                                         cache_dir=cache), range(4)))
    assert all(r.ok for r in results), [r.log for r in results]


def test_a_failure_the_machine_caused_is_not_remembered_for_the_next_build(tmp_path: Path) -> None:
    """A compile error is kept for the same unit's next build; a compiler that could not write its
    temp file, ran out of memory or was killed failed for the machine's sake, and the next build
    (another machine, a freed disk) must compile again, never read that as the solution's error."""
    import os as _os

    from kag.core.eval.orchestrator.compile_run import RunOutcome, remember_failure, remembered_failure
    from kag.core.trust.integrity import SignedStore

    store = SignedStore(tmp_path / "failures", "failure", _os.urandom(32))
    machine = {"tmp": RunOutcome(1, "Cannot create temporary file in /tmp/x/: Permission denied"),
               "disk": RunOutcome(1, "fatal error: error writing to /tmp/ccX.s: No space left on device"),
               "oom": RunOutcome(1, "c++: fatal error: Killed signal terminated program cc1plus"),
               "signal": RunOutcome(-9, ""), "missing": RunOutcome(127, "nvcc: cannot run: no such file"),
               "starved": RunOutcome(-1, "timed out", timed_out=True, starved=True)}
    for key, outcome in machine.items():
        remember_failure(store, key, outcome)
        assert remembered_failure(store, key, 100.0) is None, key
    remember_failure(store, "error", RunOutcome(1, "kernels/a.cpp:7:3: error: 'foo' was not declared"))
    kept = remembered_failure(store, "error", 100.0)
    assert kept is not None and kept.rc == 1 and "'foo' was not declared" in kept.out
