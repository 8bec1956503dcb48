"""Provenance by symbols (kag.core.trust.symbols): what a built module imports of PyTorch's, read
from its ELF symbol table, against the allow-list of what a kernel binding needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kag.core.trust.symbols import mangled_path, refused_imports, undefined_symbols, why_refused

REFUSED = {
    "_ZN2at4_ops4relu4callERKNS_6TensorE": "operator relu",
    "_ZN2at4_ops4relu10redispatchEN3c1014DispatchKeySetERKNS_6TensorE": "operator relu",
    "_ZN2at3cpu9clamp_minERKNS_6TensorERKN3c106ScalarE": "at::cpu::clamp_min",
    "_ZN2at4cuda11maximum_outERNS_6TensorERKS1_S4_": "at::cuda::maximum_out",
    "_ZN2at6native4reluERKNS_6TensorE": "at::native::relu",
    "_ZN2at20enableRecordFunctionEb": "enableRecordFunction",
    "_ZN3c1010Dispatcher9singletonEv": "c10::Dispatcher",
    "_ZN2at4_ops9view_copy4callERKNS_6TensorEN3c108ArrayRefINS4_6SymIntEEE": "operator view_copy",
    "dlsym": "run time",
}
ALLOWED = ["_ZN2at4_ops10empty_like4callERKNS_6TensorESt8optionalIN3c1010ScalarTypeEE",
           "_ZN2at4_ops19empty_memory_format4callE", "_ZN2at4_ops12fill__Scalar4callE",
           "_ZNK2at10TensorBase8data_ptrIfEEPT_v", "_ZN3c106detail14torchCheckFailEPKcS2_jS2_",
           "_ZN3c104cuda20getCurrentCUDAStreamEa", "_ZN2at4cuda24getCurrentCUDABlasHandleEv", "memcpy",
           "cublasSgemm_v2", "_ZN6caffe28TypeMeta26error_unsupported_typemetaES0_", "THPVariable_Wrap"]


@pytest.mark.parametrize("symbol", sorted(REFUSED))
def test_pytorchs_operators_and_their_back_doors_are_refused(symbol):
    why = why_refused(symbol)
    assert why is not None and REFUSED[symbol] in why, why


@pytest.mark.parametrize("symbol", ALLOWED)
def test_what_a_binding_needs_is_allowed(symbol):
    assert why_refused(symbol) is None


def test_cublas_handles_follow_the_tasks_policy():
    assert why_refused("_ZN2at4cuda24getCurrentCUDABlasHandleEv", allow_cublas=False) is not None
    assert why_refused("_ZN2at6native14getCudnnHandleEv", allow_cudnn=True) is None
    assert why_refused("_ZN2at6native14getCudnnHandleEv", allow_cudnn=False) is not None


def test_a_mangled_name_is_read_by_its_nested_names():
    assert mangled_path("_ZN2at4_ops4relu4callERKNS_6TensorE") == ["at", "_ops", "relu", "call"]
    assert mangled_path("_ZNK2at10TensorBase8data_ptrIfEEPT_v") == ["at", "TensorBase", "data_ptr"]
    assert mangled_path("memcpy") == []


def test_a_built_module_is_read_from_its_elf_table(tmp_path: Path):
    """The honest CPU ReLU's binding imports only allowed symbols; a module that is not ELF has none."""
    from kag.core.agent.workspace import read_solution
    from kag.core.eval.orchestrator.build import build_solution
    from kag.plugins.backends.cpu import CpuBackend

    repo = Path(__file__).resolve().parents[3]
    built = build_solution(read_solution(repo / "examples" / "relu" / "cpu"), CpuBackend(), tmp_path / "out",
                           cache_dir=tmp_path / "cache")
    assert built.ok, built.log
    module = next(Path(built.module_dir).glob("cuda_extension*.so"))
    imports = undefined_symbols(str(module))
    assert any(s.startswith("_ZN2at4_ops") for s in imports) and refused_imports(str(module)) == []
    bogus = tmp_path / "bogus.so"
    bogus.write_text("not a module")
    assert refused_imports(str(bogus)) == []
