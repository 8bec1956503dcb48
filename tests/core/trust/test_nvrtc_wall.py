"""NVRTC out of a candidate's reach (kag.core.trust.nvrtc_wall), on the CPU: the real NVRTC of this
installation (nvidia-cuda-nvrtc, a cupy dependency) covered in a forked child, its files found by the
library scan, kept from a CUDA build and from a candidate narrowed to the task's library policy.
What it stops (PyTorch's run-time-compiled ops) runs on a GPU: bench/results/2026-11-27-60c254e-h200."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kag.core.trust import confine, fatbin_wall, nvrtc_wall
from tests.core.trust.forked import in_forked_child

KERNELBENCH = Path(__file__).resolve().parents[3].parent / "shared" / "kernelbench"


def _nvrtc() -> str | None:
    """The libnvrtc.so of this installation, found as the candidate's scan finds it."""
    for path in fatbin_wall.compiler_files():
        if os.path.basename(path).startswith("libnvrtc.so"):
            return path
    return None


needs_nvrtc = pytest.mark.skipif(_nvrtc() is None, reason="no libnvrtc.so under the candidate's read paths")


@needs_nvrtc
def test_closed_nvrtc_cannot_run_and_its_pages_cannot_be_given_back():
    lib = ctypes.CDLL(_nvrtc())  # what importing a CUDA torch does (torch/__init__.py preloads it)
    major, minor = ctypes.c_int(), ctypes.c_int()
    assert lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0 and major.value > 0

    real = os.path.realpath(_nvrtc())
    code = {real: fatbin_wall.code_sections(real)}  # the judge's scan: the candidate cannot read the file
    text = next(a for (a, size) in code[real] if size > mmap.PAGESIZE * 4)

    def work(out: dict) -> None:
        lo, hi, _ = nvrtc_wall.code_ranges(fatbin_wall.NVRTC)[0]
        base = fatbin_wall.mapped_libraries()[_nvrtc()]
        out["covered"] = nvrtc_wall.close_compiler(code)
        out["sealed"] = fatbin_wall.SEALED.get(os.path.basename(_nvrtc()), False)
        out["left"] = nvrtc_wall.code_ranges(fatbin_wall.NVRTC)
        import ctypes.util

        ctypes.CDLL(ctypes.util.find_library("m"))  # a later dlopen reads NVRTC's symbol tables: still there
        out["dlopen"] = "ran"
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        ok = libc.mprotect(ctypes.c_void_p(lo), ctypes.c_size_t(mmap.PAGESIZE), 5)  # read + exec again
        out["mprotect"] = "ran" if ok == 0 else errno.errorcode[ctypes.get_errno()]
        out["call"], out["read code"] = (_status(f) for f in (
            lambda: lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)),  # as ATen's jiterator calls it
            lambda: ctypes.string_at(base + text + mmap.PAGESIZE, 16)))  # to copy it and run it elsewhere

    got = in_forked_child(work, {})
    assert "libnvrtc.so" in " ".join(got["covered"]) and got["left"] == [], got
    assert got.get("call") == -11 and got["read code"] == -11 and got["dlopen"] == "ran", got  # SIGSEGV: no code
    if got["sealed"]:
        assert got["mprotect"] == "EPERM", got
    assert lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0  # the test process keeps its own


def _status(action) -> int:
    """The exit status of a forked child that runs ``action`` (-11: SIGSEGV)."""
    pid = os.fork()
    if pid == 0:
        import faulthandler

        faulthandler.disable()  # the test runner's: no traceback for the crash this child is for
        action()
        os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_cudnn_is_for_tasks_with_a_convolution_or_an_rnn():
    assert nvrtc_wall.task_uses_cudnn("self.conv = nn.Conv2d(3, 16, 3)")
    assert nvrtc_wall.task_uses_cudnn("return F.conv_transpose3d(x, self.w)")
    assert nvrtc_wall.task_uses_cudnn("self.rnn = nn.LSTM(128, 256, batch_first=True)")
    assert not nvrtc_wall.task_uses_cudnn("return torch.relu(x)  # converted from ...")
    assert not nvrtc_wall.task_uses_cudnn("return torch.special.bessel_j0(x)")
    if KERNELBENCH.is_dir():
        conv = (KERNELBENCH / "level1").glob("*[Cc]onv*.py")
        assert all(nvrtc_wall.task_uses_cudnn(p.read_text()) for p in conv)
        assert not nvrtc_wall.task_uses_cudnn((KERNELBENCH / "level1" / "19_ReLU.py").read_text())


def test_a_segfault_where_nvrtc_was_closed_says_what_may_have_caused_it():
    msg = "the candidate process crashed during the checks: killed by SIGSEGV"
    assert "jiterator" in nvrtc_wall.explain_crash(msg, ["fatbin wall (9 libraries, 9 sealed)", "NVRTC closed (2 libraries, 2 sealed)"])
    assert nvrtc_wall.explain_crash(msg, ["fatbin wall (9 libraries, 9 sealed)"]) == msg


def test_the_scan_finds_nvrtc_shared_and_static(tmp_path: Path, monkeypatch):
    root = tmp_path / "root" / "cuda" / "lib64"
    root.mkdir(parents=True)
    names = ["libnvrtc.so.13.0.88", "libnvrtc-builtins.so.13.0.88", "libnvrtc_static.a", "libnvrtc.alt.so.13.0.88",
             "libcaffe2_nvrtc.so"]
    for name in names + ["libcudart.so.13", "nvrtc.cpython-312-x86_64-linux-gnu.so"]:
        (root / name).write_bytes(b"x")
    (root / "libnvrtc.so.13").symlink_to(root / "libnvrtc.so.13.0.88")
    monkeypatch.setattr(fatbin_wall, "library_roots", lambda: [str(tmp_path / "root")])
    cache = tmp_path / "cache"
    assert fatbin_wall.compiler_files(str(cache)) == sorted(str(root / n) for n in names)
    (root / "libnvrtc.so.14").write_bytes(b"x")  # a new one beside them: the cache sees it
    assert str(root / "libnvrtc.so.14") in fatbin_wall.compiler_files(str(cache))


@needs_nvrtc
@pytest.mark.skipif(confine.landlock_abi() < 1, reason="needs Landlock")
def test_a_cuda_build_cannot_read_nvrtc_and_the_nvrtc_backends_can(tmp_path: Path):
    """A solution's source steers what its compiler reads (``.incbin``): NVRTC embedded in its module
    could be loaded in a candidate that has none. The build's Landlock hides NVRTC's files, not
    their neighbours."""
    from kag.core.eval.orchestrator.build import confined, hidden_from_build
    from kag.plugins.backends.cpu import CpuBackend
    from kag.plugins.backends.cuda import CudaBackend
    from kag.plugins.backends.nvrtc import NvrtcBackend

    cache = tmp_path / "cache"
    hide = hidden_from_build(CudaBackend(), cache)
    assert os.path.realpath(_nvrtc()) in hide and set(fatbin_wall.archive_files(str(cache))) <= set(hide)
    assert hidden_from_build(NvrtcBackend(), cache) == [] and hidden_from_build(CpuBackend(), cache) == []
    nvrtc = os.path.realpath(_nvrtc())
    sibling = os.path.realpath(sys.executable)  # any other file of the read paths
    read = ["sh", "-c", 'head -c 4 "$0" > /dev/null && echo read']  # not Python: it lists folders to import
    work = tmp_path / "work"
    work.mkdir()
    for path, hidden, want in ((nvrtc, hide, "Permission denied"), (sibling, hide, "read"), (nvrtc, [], "read")):
        proc = subprocess.run(confined([*read, path], work, cache, hidden), capture_output=True, text=True,
                              timeout=120)
        assert want in proc.stdout + proc.stderr, (path, proc.stdout, proc.stderr)


@needs_nvrtc
@pytest.mark.slow
def test_nvrtc_embedded_with_incbin_fails_the_cuda_build(tmp_path: Path):
    from kag.core.eval.orchestrator.build import build_solution
    from kag.core.records import Solution
    from kag.plugins.backends.cuda import CudaBackend, find_nvcc

    if find_nvcc() is None or confine.landlock_abi() < 1:
        pytest.skip("needs nvcc and Landlock")
    nvrtc = os.path.realpath(_nvrtc())
    source = (f'__asm__(".section .rodata\\n.global kag_blob\\nkag_blob:\\n.incbin \\"{nvrtc}\\"\\n.previous");\n'
              "__global__ void k(float* x) { x[0] = 1.0f; }\n")
    result = build_solution(Solution(model_new="", kernels={"k.cu": source}), CudaBackend(), tmp_path / "out",
                            cache_dir=tmp_path / "cache")
    assert result.failed == ["kernels/k.cu"] and nvrtc in result.log, result.log
    assert "file not found" in result.log or "Permission denied" in result.log, result.log  # it exists: Landlock


@pytest.mark.skipif(confine.landlock_abi() < 1, reason="needs Landlock")
def test_the_tasks_policy_narrows_a_candidate_to_fewer_libraries(tmp_path: Path):
    from kag.core.trust.isolation import CandidatePlan

    folder = tmp_path / "lib"
    folder.mkdir()
    nvrtc = folder / "libnvrtc.so.13"
    cudnn, cublas = folder / "libcudnn_engines_precompiled.so.9", folder / "libcublas.so.13"
    for f in (nvrtc, cudnn, cublas):
        f.write_text(f.name)
    (tmp_path / "tmp").mkdir()
    plan = CandidatePlan(tmp_dir=str(tmp_path / "tmp"), read_paths=(str(tmp_path), *confine.system_read_paths()),
                         unreadable=(str(nvrtc),), optional=(str(cudnn), str(cublas)), cuda=False, namespaces=False,
                         seccomp=False)

    def work(out: dict) -> None:
        plan.apply_in_child()  # the first layer: the folder is no longer listable, only its other files readable
        out["before"] = [f.read_text() for f in (cudnn, cublas)]
        out["layer"] = plan.narrow([str(cudnn), str(nvrtc)])
        for name, f in (("nvrtc", nvrtc), ("cudnn", cudnn), ("cublas", cublas)):
            try:
                out[name] = f.read_text()
            except PermissionError:
                out[name] = "denied"

    got = in_forked_child(work, {})
    assert got == {"before": [cudnn.name, cublas.name], "nvrtc": "denied", "cudnn": "denied", "cublas": cublas.name,
                   "layer": "landlock: 1 more libraries unreadable (the task's library policy)"}, got

    def threaded(out: dict) -> None:
        import threading

        plan.apply_in_child()
        stop = threading.Event()
        t = threading.Thread(target=stop.wait)
        t.start()
        try:
            plan.narrow([str(cudnn)])
        finally:
            stop.set()
            t.join()

    assert "2 threads" in in_forked_child(threaded, {}).get("error", ""), "a second thread would keep the old rules"


def test_the_scan_finds_archives_a_library_could_travel_in(tmp_path: Path, monkeypatch):
    root = tmp_path / "root"
    (root / "store").mkdir(parents=True)
    names = ["nvidia_cuda_nvrtc-13.0.88-py3-none-manylinux2010_x86_64.whl", "torch-2.14.1.tar.gz", "pkg.conda", "x.zip"]
    for name in names + ["README.txt", "libfoo.so.1"]:
        (root / "store" / name).write_bytes(b"x")
    (root / "site" / "pkg").mkdir(parents=True)
    (root / "site" / "python311.zip").write_bytes(b"x")  # on the import path: Python's own, kept
    (root / "site" / "pkg" / "data.tar.gz").write_bytes(b"x")  # a package's data: hiding it would make
    monkeypatch.setattr(fatbin_wall, "library_roots", lambda: [str(root)])  # site/ unlistable, imports fail
    monkeypatch.setattr(sys, "path", [*sys.path, str(root / "site" / "python311.zip"), str(root / "site")])
    assert fatbin_wall.archive_files(str(tmp_path / "cache")) == sorted(str(root / "store" / n) for n in names)


@pytest.mark.skipif(confine.landlock_abi() < 1, reason="needs Landlock")
def test_a_cuda_candidate_reads_no_archive_and_cannot_write_the_walls_pages_through_its_memory_file(tmp_path: Path):
    """Two routes an independent review took on the CPU: NVRTC unpacked from a wheel of a local package
    store into memory and loaded fresh; and a sealed read-only page written through /proc/self/mem (the
    kernel forces such writes past mseal on a private mapping), which would put GPU code back behind the
    fatbin wall. The candidate may write /proc/self (the CUDA driver names its threads there), so the
    walls' pages are shared mappings of write-sealed memory files: the forced write fails on them, and
    still succeeds on an ordinary read-only page (the control: the route is open, the pages close it)."""
    import zipfile

    from kag.core.trust.isolation import CandidatePlan

    wheel = next(iter(fatbin_wall.archive_files()), None)
    (tmp_path / "tmp").mkdir()
    plan = CandidatePlan(tmp_dir=str(tmp_path / "tmp"), read_paths=tuple(confine.system_read_paths()),
                         unreadable=tuple(fatbin_wall.archive_files()), cuda=False, namespaces=False, seccomp=False)

    def work(out: dict) -> None:
        plan.apply_in_child()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        size = 2 * mmap.PAGESIZE
        walled = libc.mmap(None, size, 1, 0x22, -1, 0)  # where a library's GPU code was
        fatbin_wall.cover(libc, walled, size, fatbin_wall.PROT_READ, {10: b"kept"}, "test")
        out["sealed"] = fatbin_wall.seal(libc, walled, size)
        plain = libc.mmap(None, mmap.PAGESIZE, 1, 0x22, -1, 0)  # read-only, private
        for name, address in (("walled", walled + mmap.PAGESIZE), ("plain", plain)):
            try:
                with open("/proc/self/mem", "r+b", buffering=0) as mem:
                    mem.seek(address)
                    mem.write(b"GPU code")
                out[name] = "written" if ctypes.string_at(address, 8) == b"GPU code" else "unchanged"
            except OSError as exc:
                out[name] = f"refused ({exc.strerror})"
        out["kept"] = ctypes.string_at(walled + 10, 4).decode()
        out["zeros"] = ctypes.string_at(walled + mmap.PAGESIZE, 8).hex()
        if wheel:
            try:
                zipfile.ZipFile(wheel).namelist()
                out["wheel"] = "read"
            except PermissionError:
                out["wheel"] = "denied"

    got = in_forked_child(work, {})
    assert got["plain"] == "written", got  # /proc/self/mem is writable in a candidate
    assert got["walled"].startswith("refused") and got["zeros"] == bytes(8).hex() and got["kept"] == "kept", got
    if wheel:
        assert got["wheel"] == "denied", (wheel, got)
