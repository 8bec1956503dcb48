"""The nvrtc backend: NVRTC compiles kernels/*.cu into a Python cuda_extension (runs without a GPU),
a one-kernel edit rebuilds only that kernel, and on a GPU a solution scores like its nvcc twin
while cupy's own library kernels are still foreign to the provenance guard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kag.core.eval.orchestrator.build import build_solution
from kag.core.plugins import Plugins
from kag.core.records import Solution
from kag.plugins.backends.nvrtc import NvrtcBackend, nvrtc_version
from kag.plugins.backends.nvrtc_compile import kernel_signatures, parameter_types

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
needs_nvrtc = pytest.mark.skipif(nvrtc_version() is None, reason="cupy with libnvrtc not installed (kag[cupy])")


def _example(op: str) -> Solution:
    folder = EXAMPLES / op / "nvrtc"
    return Solution(model_new=(folder / "model_new.py").read_text(),
                    kernels={p.name: p.read_text() for p in (folder / "kernels").iterdir()})


def test_registered_as_a_backend_on_the_gpu() -> None:
    plugins = Plugins(load_entrypoints=False)
    assert isinstance(plugins.create("backend", "nvrtc"), NvrtcBackend)
    assert plugins.entry("backend", "nvrtc").factory.device == "cuda"


def test_kernel_signatures_are_read_from_the_source() -> None:
    assert parameter_types("const float* __restrict__ x, float4 *y, long long n, unsigned int k") == \
        ["float*", "float4*", "long long", "unsigned int"]
    found, mangled = kernel_signatures('''
        // extern "C" __global__ void commented_out(int n)
        extern "C" __global__ void __launch_bounds__(256) scale(float* y, float a, int n) {}
        __global__ void templated_kernel(float* y) {}
    ''')
    assert found == {"scale": ["float*", "float", "int"]}
    assert mangled == ["templated_kernel"]


@needs_nvrtc
def test_build_writes_a_python_module_and_rebuilds_only_the_edited_kernel(tmp_path: Path) -> None:
    sol = _example("relu")
    sol.kernels["sigmoid.cu"] = _example("sigmoid").kernels["sigmoid.cu"]
    first = build_solution(sol, NvrtcBackend(), tmp_path / "out", cache_dir=tmp_path / "cache")
    assert first.ok, first.log
    assert sorted(first.compiled) == ["kernels/relu.cu", "kernels/sigmoid.cu"]
    module = (tmp_path / "out" / "cuda_extension.py").read_text()
    assert "from kag.plugins.backends.nvrtc_runtime import load_kernels" in module
    namespace: dict = {}
    exec(compile(module.replace("globals().update(_load_kernels(OBJECTS))", ""), "cuda_extension.py", "exec"),
         namespace)
    objects = {o["source"]: o for o in namespace["OBJECTS"]}
    assert objects["relu.cu"]["kernels"]["relu_vec4_kernel"] == ["float4*", "float4*", "long long"]
    assert objects["relu.cu"]["cubin"] and objects["relu.cu"]["arch"].startswith("sm_")

    sol.kernels["relu.cu"] += "\n// an edit\n"
    again = build_solution(sol, NvrtcBackend(), tmp_path / "out", cache_dir=tmp_path / "cache")
    assert again.ok and again.compiled == ["kernels/relu.cu"] and again.cached == ["kernels/sigmoid.cu"]


@needs_nvrtc
def test_errors_name_the_file_and_the_fix(tmp_path: Path) -> None:
    broken = Solution(model_new="", kernels={"bad.cu": 'extern "C" __global__ void k(float* y) { y[0] = undefined_name; }'})
    res = build_solution(broken, NvrtcBackend(), tmp_path / "a", cache_dir=tmp_path / "cache")
    assert not res.ok and "bad.cu" in res.log and "undefined_name" in res.log

    mangled = Solution(model_new="", kernels={"m.cu": "__global__ void k(float* y) { y[0] = 1.f; }"})
    res = build_solution(mangled, NvrtcBackend(), tmp_path / "b", cache_dir=tmp_path / "cache")
    assert not res.ok and 'extern "C"' in res.log

    host = Solution(model_new="", kernels={"k.cu": _example("relu").kernels["relu.cu"], "k_binding.cpp": "int x;"})
    res = build_solution(host, NvrtcBackend(), tmp_path / "c", cache_dir=tmp_path / "cache")
    assert not res.ok and "--backend cuda" in res.log


def _score(solution_dir: Path, backend: str, *extra: str) -> dict:
    from tests.conftest import run_kag

    task = EXAMPLES / "kernelbench_sample" / "level1" / "19_ReLU.py"
    proc = run_kag("score", "--task", str(task), "--solution", str(solution_dir), "--backend", backend, "--json",
                   *extra)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.gpu
@needs_nvrtc
def test_on_a_gpu_an_nvrtc_solution_scores_like_its_nvcc_twin(tmp_path: Path) -> None:
    pytest.importorskip("torch").cuda.is_available() or pytest.skip("no GPU")
    nvrtc = _score(EXAMPLES / "relu" / "nvrtc", "nvrtc")
    nvcc = _score(EXAMPLES / "relu" / "cuda", "cuda")
    assert nvrtc["correct"] and nvcc["correct"], (nvrtc.get("error"), nvcc.get("error"))
    assert nvrtc["reward"] == nvcc["reward"]


CUPY_LIBRARY = '''
import sys
import torch
import torch.nn as nn
import cuda_extension

cp = sys.modules["cupy"]  # loaded by the module the nvrtc backend built


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        cuda_extension.relu_scalar_kernel((1,), (32,), x, y, 0, 0)  # one launch of its own, doing nothing
        out = cp.maximum(cp.from_dlpack(x), 0)  # the work: a cupy library kernel
        y.copy_(torch.from_dlpack(out))
        return y
'''


@pytest.mark.gpu
@needs_nvrtc
def test_on_a_gpu_cupy_library_kernels_are_not_the_solutions_own(tmp_path: Path) -> None:
    pytest.importorskip("torch").cuda.is_available() or pytest.skip("no GPU")
    sol = tmp_path / "sol"
    (sol / "kernels").mkdir(parents=True)
    (sol / "kernels" / "relu.cu").write_text((EXAMPLES / "relu" / "nvrtc" / "kernels" / "relu.cu").read_text())
    (sol / "model_new.py").write_text(CUPY_LIBRARY)
    result = _score(sol, "nvrtc", "--no-static-guards")
    assert result["reward"]["value"] == -1, result
    assert any(v["guard"] == "kernel-provenance" for v in result.get("violations", [])), result


def test_cli_lists_the_backend() -> None:
    from tests.conftest import run_kag

    proc = run_kag("plugins")
    assert proc.returncode == 0 and "nvrtc" in proc.stdout, proc.stdout
