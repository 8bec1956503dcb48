"""The build cache as an attacker meets it: edited or swapped objects and modules are rebuilt, and an
object is reused only for the same bytes in (its key covers every solution file its compile can read).

Most tests use the real C++ compiler without torch (``PlainBackend``: the fixed binding compiles to
an empty object, the module is a plain shared library called through ctypes), so they take a second
or two; one builds the real CPU backend's torch module and is slow.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from kag.core.eval.orchestrator.build import BuildResult, build_solution, tool_version, unit_inputs
from kag.core.records import Solution

CXX = os.environ.get("CXX", "c++")
pytestmark = pytest.mark.skipif(shutil.which(CXX) is None, reason="no C++ compiler")

RELU = 'extern "C" float apply(float x) { return x > 0.f ? x : 0.f; }\n'
LEAKY = 'extern "C" float apply(float x) { return x > 0.f ? x : 0.1f * x; }\n'
SCALE = 'extern "C" float scale(float x) { return 2.f * x; }\n'
INJECTED = 'extern "C" int injected() { return 42; }\n'


class PlainBackend:
    """The real compiler without torch: what build.py does with the cache is the same."""

    name = "plain"
    device = "cpu"

    def toolchain_id(self) -> str:
        return f"plain|{tool_version(CXX)}"

    def source_kind(self, rel: str) -> str:
        return "kernel"

    def compile_command(self, kind: str, source: str, obj: str) -> list[str]:
        if kind == "binding":  # the shared, once-built object: empty here
            return [CXX, "-c", "-x", "c++", "/dev/null", "-o", obj]
        return [CXX, "-O1", "-fPIC", "-I.", "-c", source, "-o", obj]

    def link_command(self, objects: list[str], out: str, sources_text: str) -> list[str]:
        return [CXX, "-shared", *objects, "-o", out]


def build(kernels: dict[str, str], cache: Path, out: Path) -> BuildResult:
    result = build_solution(Solution(model_new="import cuda_extension\n", kernels=kernels), PlainBackend(), out,
                            cache_dir=cache)
    assert result.ok, result.log
    return result


def load(result: BuildResult) -> ctypes.CDLL:
    (module,) = Path(result.module_dir).glob("cuda_extension*")
    lib = ctypes.CDLL(str(module))
    if hasattr(lib, "apply"):
        lib.apply.restype, lib.apply.argtypes = ctypes.c_float, [ctypes.c_float]
    return lib


def compile_object(tmp: Path, source: str) -> bytes:
    (tmp / "other.cpp").write_text(source)
    subprocess.run([CXX, "-O1", "-fPIC", "-c", "other.cpp", "-o", "other.o"], cwd=tmp, check=True)
    return (tmp / "other.o").read_bytes()


def cached(cache: Path, kind: str = "objects") -> set[Path]:
    return set((cache / kind).glob("*.o" if kind == "objects" else "*.so"))


def build_new(kernels: dict[str, str], cache: Path, out: Path, kind: str = "objects") -> tuple[BuildResult, Path]:
    """Build, and the one cache file (of ``kind``) that this build added."""
    before = cached(cache, kind)
    result = build(kernels, cache, out)
    (added,) = cached(cache, kind) - before
    return result, added


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_a_fresh_build_is_signed_and_reused(cache: Path, tmp_path: Path) -> None:
    old = os.umask(0o002)  # the cache's modes must not depend on the umask
    try:
        first = build({"relu.cpp": RELU}, cache, tmp_path / "a")
    finally:
        os.umask(old)
    assert sorted(first.compiled) == ["binding.cpp", "kernels/relu.cpp"] and first.warnings == []
    assert load(first).apply(-3.0) == 0.0 and load(first).apply(2.0) == 2.0
    files = [p for p in cache.rglob("*") if p.is_file()]
    # flight/ holds one lock per compile unit, failures/ only its own lock after a clean build
    assert {p.parent.name for p in files} == {"objects", "modules", "private", "flight", "failures"}
    assert [p.name for p in files if p.parent.name == "failures"] == [".lock"]
    for path in files:
        want = 0o600 if path.name == "hmac-sha256.key" or path.name.endswith(".lock") else 0o644
        assert mode(path) == want and path.stat().st_uid == os.geteuid(), path
    assert mode(cache / "objects") == mode(cache / "modules") == 0o755 and mode(cache / "private") == 0o700
    assert all(p.with_name(p.name + ".mac").is_file() for p in files if p.suffix in (".o", ".so"))
    second = build({"relu.cpp": RELU}, cache, tmp_path / "b")
    assert second.compiled == [] and sorted(second.cached) == ["binding.cpp", "kernels/relu.cpp"]


@pytest.mark.parametrize("attack", ["append", "swap", "swap_with_mac", "unsigned"])
def test_a_tampered_object_is_rebuilt(cache: Path, tmp_path: Path, attack: str) -> None:
    build({}, cache, tmp_path / "e")  # the binding object first
    _, target = build_new({"relu.cpp": RELU}, cache, tmp_path / "a")
    _, leaky = build_new({"leaky.cpp": LEAKY}, cache, tmp_path / "l")  # a genuine object and MAC of other source
    mac = target.with_name(target.name + ".mac")
    if attack == "append":  # code merged into the object, as a solution or a bash command could do
        with open(target, "ab") as fh:
            fh.write(compile_object(tmp_path, INJECTED))
    elif attack == "swap":  # an object compiled from different source, put under relu's key
        target.write_bytes(compile_object(tmp_path, LEAKY))
    elif attack == "swap_with_mac":  # a genuine object and its genuine MAC, moved to relu's key
        target.write_bytes(leaky.read_bytes())
        mac.write_bytes(leaky.with_name(leaky.name + ".mac").read_bytes())
    else:
        target.write_bytes(compile_object(tmp_path, LEAKY))
        mac.unlink()
    # a new solution that reuses relu.cpp must be linked again: the cached relu object is needed
    result = build({"relu.cpp": RELU, "scale.cpp": SCALE}, cache, tmp_path / "b")
    assert "kernels/relu.cpp" in result.compiled, (result.compiled, result.cached)
    assert result.warnings == [f"warning: the cached {target.name} failed its integrity check; ignored and rebuilt"]
    assert result.warnings[0] in result.log
    lib = load(result)
    assert lib.apply(-3.0) == 0.0 and not hasattr(lib, "injected")
    again = build({"relu.cpp": RELU, "leaky.cpp": LEAKY.replace("apply", "apply2")}, cache, tmp_path / "c")
    assert "kernels/relu.cpp" in again.cached and again.warnings == [], "the rebuilt object is trusted again"


def test_the_shared_binding_object_is_rebuilt_when_tampered(cache: Path, tmp_path: Path) -> None:
    _, binding = build_new({}, cache, tmp_path / "e")  # a solution with no kernel: only the binding object
    build({"relu.cpp": RELU}, cache, tmp_path / "a")
    binding.write_bytes(compile_object(tmp_path, INJECTED))  # code every later solution would link
    result = build({"scale.cpp": SCALE}, cache, tmp_path / "b")
    assert "binding.cpp" in result.compiled and len(result.warnings) == 1
    assert not hasattr(load(result), "injected")


@pytest.mark.parametrize("attack", ["append", "swap_with_mac"])
def test_a_tampered_linked_module_is_relinked(cache: Path, tmp_path: Path, attack: str) -> None:
    _, target = build_new({"relu.cpp": RELU}, cache, tmp_path / "a", "modules")
    _, leaky_so = build_new({"relu.cpp": LEAKY}, cache, tmp_path / "l", "modules")
    if attack == "append":
        with open(target, "ab") as fh:
            fh.write(b"\0" * 64)
    else:
        target.write_bytes(leaky_so.read_bytes())
        target.with_name(target.name + ".mac").write_bytes(leaky_so.with_name(leaky_so.name + ".mac").read_bytes())
    result = build({"relu.cpp": RELU}, cache, tmp_path / "b")
    assert result.compiled == [] and len(result.warnings) == 1 and target.name in result.warnings[0]
    assert load(result).apply(-3.0) == 0.0
    module = next(Path(result.module_dir).glob("cuda_extension*")).read_bytes()
    assert module == target.read_bytes(), "the relinked module replaced the tampered one"


def test_a_module_swapped_after_its_check_is_never_used(cache: Path, tmp_path: Path, monkeypatch) -> None:
    """The installed module is the bytes that were verified, not whatever the cache file holds later."""
    from kag.core.trust import integrity

    build({"relu.cpp": RELU}, cache, tmp_path / "a")
    leaky = next(Path(build({"relu.cpp": LEAKY}, cache, tmp_path / "l").module_dir).glob("cuda_extension*"))
    read = integrity.SignedStore.read

    def read_then_swap(self, name):
        data = read(self, name)
        if self.kind == "module" and data is not None:
            self.path(name).write_bytes(leaky.read_bytes())
        return data

    monkeypatch.setattr(integrity.SignedStore, "read", read_then_swap)
    result = build({"relu.cpp": RELU}, cache, tmp_path / "b")
    assert load(result).apply(-3.0) == 0.0


# -- the key covers everything the compile reads from the solution ------------------------------
TABLE_USER = '#include "table.txt"\nextern "C" float apply(float x) { return x * FACTOR; }\n'


def test_a_named_non_header_file_is_part_of_the_key(cache: Path, tmp_path: Path) -> None:
    a = build({"k.cpp": TABLE_USER, "table.txt": "#define FACTOR 2.f\n"}, cache, tmp_path / "a")
    b = build({"k.cpp": TABLE_USER, "table.txt": "#define FACTOR 3.f\n"}, cache, tmp_path / "b")
    assert "kernels/k.cpp" in b.compiled
    assert load(a).apply(1.0) == 2.0 and load(b).apply(1.0) == 3.0


def test_an_included_source_is_part_of_the_key(cache: Path, tmp_path: Path) -> None:
    user = '#include "helper.cpp"\nextern "C" float apply(float x) { return helper(x); }\n'
    helper = 'static float helper(float x) { return x + %s; }\n'
    a = build({"user.cpp": user, "helper.cpp": helper % "1.f"}, cache, tmp_path / "a")
    b = build({"user.cpp": user, "helper.cpp": helper % "5.f"}, cache, tmp_path / "b")
    assert load(a).apply(1.0) == 2.0 and load(b).apply(1.0) == 6.0
    assert sorted(b.compiled) == ["kernels/helper.cpp", "kernels/user.cpp"]


def test_an_include_spelled_by_macros_finds_no_unkeyed_file(cache: Path, tmp_path: Path) -> None:
    sneaky = ('#define NAME helper\n#define HDR <kernels/NAME.cpp>\n#include HDR\n'
              'extern "C" float apply(float x) { return helper(x); }\n')
    result = build_solution(Solution(model_new="", kernels={"user.cpp": sneaky,
                                                             "helper.cpp": "static float helper(float x) { return x; }\n"}),
                            PlainBackend(), tmp_path / "a", cache_dir=cache)
    assert not result.ok and result.failed == ["kernels/user.cpp"]
    assert "kernels/helper.cpp" in result.log and "No such file" in result.log


def test_unit_inputs() -> None:
    kernels = {"a.cu": '#include "common.cuh"\n', "common.cuh": '#include "impl.inl"\n#include "lut.txt"\n',
               "impl.inl": "", "lut.txt": '#include "deep.txt"\n', "deep.txt": "", "b.cu": "", "notes.md": "b.cu",
               "sub/c.cu": '#include "../common.cuh"\n#include <kernels/sub/d.cuh>\n', "sub/d.cuh": ""}
    assert sorted(unit_inputs("a.cu", kernels)) == ["a.cu", "common.cuh", "deep.txt", "impl.inl", "lut.txt"]
    assert sorted(unit_inputs("b.cu", kernels)) == ["b.cu"]  # a header nobody includes is not read
    assert sorted(unit_inputs("sub/c.cu", kernels)) == ["common.cuh", "deep.txt", "impl.inl", "lut.txt", "sub/c.cu",
                                                        "sub/d.cuh"]


def test_a_name_in_a_comment_or_a_string_pulls_no_file_into_a_unit() -> None:
    """A binding that names its kernel in a comment must not recompile (against torch's headers)
    when that kernel changes: a one-file edit took 65 s because of it (measured on the 2-core VM)."""
    binding = ('// Torch-facing side of relu.cu: calls relu_launch from relu.cu\n'
               '/* see also #include "relu.cu"\n and helper.cuh */\n'
               '#include "../binding_registry.h"\n'
               'static const char* doc = "relu.cu #include \\"helper.cuh\\"";\n'
               'int n = 1\'000; // a digit separator is not a quote: the next line still counts\n'
               '#include "used.cuh"\n')
    kernels = {"relu_binding.cpp": binding, "relu.cu": "__global__ void k() {}\n", "helper.cuh": "",
               "used.cuh": ""}
    assert sorted(unit_inputs("relu_binding.cpp", kernels)) == ["relu_binding.cpp", "used.cuh"]
    kernels["relu.cu"] += "// edited\n"
    assert sorted(unit_inputs("relu_binding.cpp", kernels)) == ["relu_binding.cpp", "used.cuh"]


# -- the key must stay out of the compiler's reach ----------------------------------------------
@pytest.mark.skipif(__import__("kag.core.trust.confine", fromlist=["x"]).landlock_abi() == 0,
                    reason="the compiler is confined with Landlock, which this kernel lacks")
def test_a_kernel_cannot_embed_the_cache_key_in_its_module(cache: Path, tmp_path: Path) -> None:
    from kag.core.trust import integrity

    key = integrity.load_key(cache)
    steal = ('asm(".section .rodata\\n.globl stolen\\nstolen:\\n.incbin \\"%s\\"\\n.previous");\n'
             % integrity.key_path(cache))
    result = build_solution(Solution(model_new="", kernels={"x.cpp": steal}), PlainBackend(), tmp_path / "a",
                            cache_dir=cache)
    assert not result.ok, "the compiler read the evaluator's key"
    assert key.hex() not in result.log, result.log


@pytest.mark.skipif(__import__("kag.core.trust.confine", fromlist=["x"]).landlock_abi() == 0,
                    reason="the compiler is confined with Landlock, which this kernel lacks")
def test_compile_errors_never_quote_a_host_file(cache: Path, tmp_path: Path) -> None:
    secret = tmp_path / "host" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("TOP-SECRET-LINE not valid C++\n")
    result = build_solution(Solution(model_new="", kernels={"x.cpp": f'#include "{secret}"\n'}), PlainBackend(),
                            tmp_path / "a", cache_dir=cache)
    assert not result.ok and "TOP-SECRET" not in result.log, result.log


# -- the real CPU backend: the torch binding object -----------------------------------------------
@pytest.mark.slow
def test_cpu_backend_rebuilds_a_tampered_binding_object(cache: Path, tmp_path: Path) -> None:
    from kag.plugins.backends.cpu import CpuBackend
    from tests.core.eval.orchestrator.test_build import LEAKY_CPP, call_relu, relu_solution

    first = build_solution(relu_solution(), CpuBackend(), tmp_path / "a", cache_dir=cache)
    assert first.ok, first.log
    (binding,) = [p for p in cached(cache) if b"PyInit_cuda_extension" in p.read_bytes()]  # PYBIND11_MODULE
    with open(binding, "ab") as fh:
        fh.write(compile_object(tmp_path, INJECTED))
    result = build_solution(relu_solution(LEAKY_CPP), CpuBackend(), tmp_path / "b", cache_dir=cache)
    assert result.ok, result.log
    assert sorted(result.compiled) == ["binding.cpp", "kernels/relu.cpp"] and len(result.warnings) == 1
    call_relu(result.module_dir, slope=0.1)
    assert b"injected" not in binding.read_bytes()
