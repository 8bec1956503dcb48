"""The shipped examples' CPU twins: each builds with kag's build and passes kag's own evaluator.

These are the honest solutions the anti-hacking work relies on: every one must compile, match
the reference under the strict tolerance (fp32 1e-4) on fresh inputs, and trip no guard. The
CUDA versions are checked on the device (they compile here, see test_cuda_sources_compile).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
NAMES = sorted(p.name for p in EXAMPLES.iterdir() if (p / "task.txt").is_file()) if EXAMPLES.is_dir() else []
KERNELBENCH = Path(os.environ.get("KAG_TEST_KERNELBENCH", ROOT / "examples" / "kernelbench_sample"))
TORCH_INCLUDE = re.compile(r'#\s*include\s*[<"](torch|ATen|c10)/')

_have_build = importlib.util.find_spec("kag.core.eval.orchestrator.build") is not None
_have_evaluate = importlib.util.find_spec("kag.core.eval.orchestrator.evaluate") is not None
pytestmark = pytest.mark.skipif(not (_have_build and _have_evaluate),
                                reason="kag.core.eval.orchestrator.build / kag.core.eval.orchestrator.evaluate not importable yet")


def test_every_example_has_both_twins():
    assert len(NAMES) >= 8, f"expected at least 8 examples under {EXAMPLES}, found {NAMES}"
    for name in NAMES:
        base = EXAMPLES / name
        task_rel = (base / "task.txt").read_text().strip()
        assert task_rel.startswith(("level1/", "level2/", "level3/")) and task_rel.endswith(".py"), task_rel
        stem = name
        for path in ("cuda/model_new.py", f"cuda/kernels/{stem}.cu", f"cuda/kernels/{stem}_binding.cpp",
                     "cpu/model_new.py", f"cpu/kernels/{stem}.cpp", f"cpu/kernels/{stem}_binding.cpp",
                     "cpu/model.py"):
            assert (base / path).is_file(), f"{base / path} is missing"
        kernels = [*(base / "cuda/kernels").glob("*.cu"),
                   *(k for k in (base / "cpu/kernels").glob("*.cpp") if not k.name.endswith("_binding.cpp"))]
        for kernel in kernels:
            assert not TORCH_INCLUDE.search(kernel.read_text()), f"{kernel} must not include torch headers"


@pytest.mark.parametrize("name", NAMES)
def test_cpu_twin_model_is_the_task_with_smaller_sizes(name):
    """model.py keeps the KernelBench Model; only module-level constants differ."""
    if not KERNELBENCH.is_dir():
        pytest.skip(f"{KERNELBENCH} not present")
    base = EXAMPLES / name
    original = (KERNELBENCH / (base / "task.txt").read_text().strip()).read_text()
    twin = (base / "cpu" / "model.py").read_text()
    assert twin.startswith("# CPU twin of KernelBench"), "model.py must say at its top that sizes were shrunk"

    def body(src: str) -> list[str]:
        # every line except comments and top-level `NAME = value` assignments
        return [ln for ln in src.splitlines()
                if not ln.startswith("#") and not (ln[:1].isalpha() and " = " in ln and "(" not in ln.split("=")[0])]

    assert body(twin) == body(original)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_cpu_twin_builds_and_passes_the_evaluator(name):
    """evaluate() builds with kag.core.eval.orchestrator.build through kag's shared cache (KAG_CACHE_DIR or
    ~/.cache/kag), so a rerun only links; strict tolerance, every guard on, no timing."""
    from kag.core.eval.orchestrator.evaluate import EvalOptions, Timeouts, evaluate
    from kag.core.plugins import Plugins
    from kag.core.records import Task
    from kag.core.agent.workspace import read_solution

    base = EXAMPLES / name / "cpu"
    plugins = Plugins()
    solution = read_solution(base)
    code = (base / "model.py").read_text()
    task = Task(name=name, source="file", code=code, path=str(base / "model.py"))
    opts = EvalOptions(backend="cpu", tolerance="strict", do_timing=False, num_checks=3,
                       timeouts=Timeouts(load_s=120, check_s=60))
    result = evaluate(task, solution, opts, plugins)
    assert result.compiled, result.build_log
    assert result.correct, f"{name}: {result.error}"
    assert not result.violations, [(v.guard, v.detail) for v in result.violations]


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_cuda_sources_compile(name, tmp_path):
    """nvcc compiles every .cu for sm_90 without torch headers (no GPU needed to compile)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    for kernel in sorted((EXAMPLES / name / "cuda" / "kernels").glob("*.cu")):
        proc = subprocess.run([nvcc, "-c", "-O3", "-std=c++17", "-Xcompiler", "-fPIC",
                               "-gencode", "arch=compute_90,code=sm_90", str(kernel), "-o", str(tmp_path / "k.o")],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]


def test_the_readme_evaluate_block_runs_as_written_on_a_cpu_machine(tmp_path):
    """README.md's 'Evaluate a solution' commands, verbatim, in a fresh folder (the README must fit
    the machine it runs on)."""
    import json

    from kag.core.eval.orchestrator.gpu_pool import cuda_usable

    if cuda_usable():
        pytest.skip("the block is written for a CPU machine (a GPU one copies examples/relu/cuda instead)")
    if shutil.which("kag") is None or shutil.which("c++") is None:
        pytest.skip("the kag command or a C++ compiler is not on PATH")
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Evaluate a solution"):]
    block = section[section.index("```bash\n") + len("```bash\n"):section.index("\n```", section.index("```bash\n"))]
    (tmp_path / "examples").symlink_to(EXAMPLES)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, (block, proc.stdout[-3000:], proc.stderr[-3000:])
    data = json.loads(proc.stdout[proc.stdout.rindex('\n{\n') + 1:] if '\n{\n' in proc.stdout else proc.stdout)
    assert data["correct"] and data["reward"]["value"] >= 1
