"""The fatbin wall's CPU-side parts (kag.core.trust.fatbin_wall, kag.core.trust.confine): finding a
section in an ELF file, which libraries keep their GPU code, and Landlock rules that leave chosen
files unreadable inside a readable folder. The wall itself runs on a GPU (bench/results)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kag.core.trust import confine
from kag.core.trust.fatbin_wall import allowed, elf_section, explain
from tests.core.trust.forked import in_forked_child


def test_a_section_is_found_by_name_in_an_elf_file():
    python = os.path.realpath(sys.executable)
    assert elf_section(python, ".text") is not None
    assert elf_section(python, ".nv_fatbin") is None  # no GPU code in the interpreter
    assert elf_section(__file__, ".text") is None  # not ELF


def test_cublas_and_cudnn_keep_their_code_only_where_the_task_allows():
    assert allowed("/x/libcublasLt.so.13", True, True) and not allowed("/x/libcublasLt.so.13", False, True)
    assert allowed("/x/libcudnn_ops.so.9", True, True) and not allowed("/x/libcudnn_ops.so.9", True, False)
    assert allowed("/x/libnvrtc.so.13", False, False) and allowed("/x/libcupti.so.13", False, False)
    assert not allowed("/x/libtorch_cuda.so", True, True) and not allowed("/x/libcusparse.so.12", True, True)


def test_a_walled_kernels_error_says_what_it_means():
    assert "PyTorch's own CUDA kernels cannot run" in explain("CUDA error: device kernel image is invalid")
    assert explain("something else") == "something else"


def landlocked(folder: Path, exclude: Path, tries: list) -> list[str]:
    """Each of ``tries`` (no-argument functions) called in a child under Landlock that reads the
    system and ``folder`` except ``exclude``: its result's repr, or "denied" where it raised OSError."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        confine.apply_landlock(confine.LandlockPolicy(read=tuple(confine.system_read_paths()) + (str(folder),),
                                                      exclude=(str(exclude),)))
        seen = []
        for attempt in tries:
            try:
                seen.append(repr(attempt()))
            except OSError:
                seen.append("denied")
        os.write(w, "|".join(seen).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        got = fh.read().split("|")
    os.waitpid(pid, 0)
    return got


@pytest.mark.skipif(confine.landlock_abi() < 1, reason="needs Landlock")
def test_an_excluded_file_is_unreadable_and_its_siblings_are_not(tmp_path: Path):
    folder = tmp_path / "lib"
    (folder / "deep").mkdir(parents=True)
    secret, sibling, nested = folder / "libtorch_cuda.so", folder / "libc10.so", folder / "deep" / "x.so"
    for f in (secret, sibling, nested):
        f.write_text(f.name)
    (tmp_path / "link.so").symlink_to(secret)
    rules = confine.readable_except([str(tmp_path)], [str(secret)])
    assert str(secret) not in rules and str(tmp_path) not in rules and str(sibling) in rules
    got = landlocked(tmp_path, secret, [f.read_text for f in (secret, sibling, nested, tmp_path / "link.so")])
    assert got == ["denied", "'libc10.so'", "'x.so'", "denied"], got


@pytest.mark.skipif(confine.landlock_abi() < 1, reason="needs Landlock")
def test_a_library_the_candidate_cannot_read_is_found_in_the_judges_table_or_refused(tmp_path: Path):
    """The candidate raises the wall after Landlock made the libraries' files unreadable to it: it
    walled 0 libraries on an H100 that way (each file's section table could not be read and the
    library was skipped), and PyTorch's kernels ran. Now the judge reads the sections and hands them
    over, and a library found in neither refuses the wall."""
    import shutil

    from kag.core.trust.fatbin_wall import wall_section

    lib = tmp_path / "libtorch_cuda.so"
    shutil.copy(os.path.realpath(sys.executable), lib)  # an ELF file (with no GPU code)
    tables = ({}, {str(lib): [4096, 512]}, {str(lib): []})
    got = landlocked(tmp_path, lib, [lambda t=t: wall_section(str(lib), t) for t in tables])
    assert got == ["denied", "(4096, 512)", "None"], got
    assert wall_section(str(lib), {}) is None  # readable here: the file itself says it has no GPU code


# ---------------------------------------------------------------------------------------------
# the wall undone by growing a file mapping (mremap), and the candidate's filter refusing it
FAKE_GPU_CODE = r"""
#define PAGE 4096
__attribute__((section(".nv_fatbin"), used, aligned(PAGE)))
const unsigned char gpu_code[3 * PAGE] = {%s};
unsigned char code_byte(int i) { return ((volatile const unsigned char*)gpu_code)[i]; }
"""
ATTACK = Path(__file__).resolve().parents[2] / "adversarial" / "cases" / "wall_mremap_python" / "cuda" / "model_new.py"


def seal_works() -> bool:
    """Whether this kernel has mseal (one anonymous page sealed for the test process's life)."""
    import ctypes

    from kag.core.trust.fatbin_wall import seal

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    page = libc.mmap(None, 4096, 1, 0x22, -1, 0)  # PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS
    return bool(page) and page != ctypes.c_void_p(-1).value and seal(libc, page, 4096)


def fake_gpu_library(folder: Path) -> Path:
    """A shared library with a ``.nv_fatbin`` section of three pages of 0x5A (built with gcc)."""
    import shutil
    import subprocess

    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    src, lib = folder / "fake_gpu.c", folder / "libfake_gpu.so"
    src.write_text(FAKE_GPU_CODE % ", ".join(["0x5A"] * (3 * 4096)))
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True)
    return lib


def undo_wall(library: str) -> str:
    """The corpus's attack (tests/adversarial/cases/wall_mremap_python, run on an H100 in
    bench/results/2026-11-27-d2e8051-h100): grow what is left of the library's file mapping in
    place over the walled pages, no open needed. Returns what it printed."""
    import contextlib
    import io

    source = ATTACK.read_text().split("class ModelNew")[0].replace("import cuda_extension", "")
    names: dict = {}
    exec(compile(source, str(ATTACK), "exec"), names)
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        names["undo_wall"](library)
    return said.getvalue().strip()


def copy_back(lib: Path) -> str:
    """The other attack: the solution has the GPU code's bytes itself (built into its own module with
    ``.incbin`` from the library, which its compiler could read; here read from the file) and
    writes them back over the walled pages (mprotect, then a copy)."""
    import ctypes
    import errno

    from kag.core.trust.fatbin_wall import elf_section, mapped_libraries

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    addr, size = elf_section(str(lib))
    data = lib.read_bytes()  # the section's bytes sit at the same offset in this file as its address
    where = mapped_libraries()[os.path.realpath(lib)] + addr
    lo, hi = where // 4096 * 4096, (where + size + 4095) // 4096 * 4096
    if libc.mprotect(lo, hi - lo, 3) != 0:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    ctypes.memmove(where, data[addr:addr + size], size)
    return "copied back"


def walled_then_attacked(lib: Path, attack: str, with_filter: bool = False, sealed: bool = True,
                         wall: bool = True) -> list[str]:
    """In a child: load ``lib``, raise the wall, read the GPU code, (the candidate's seccomp filter),
    run ``attack`` ("mremap" or "copy"), read again."""
    import ctypes

    from kag.core.trust import seccomp_allow
    from kag.core.trust.fatbin_wall import raise_wall

    def work(out: list[str]) -> None:
        fake = ctypes.CDLL(str(lib))
        fake.code_byte.restype = ctypes.c_ubyte
        out.append(hex(fake.code_byte(4096)))
        walled = raise_wall(False, False, sealed=sealed) if wall else []  # (and any other library with GPU code the
        out.append("libfake_gpu.so" if "libfake_gpu.so" in walled else ",".join(walled))  # suite loaded)
        out.append(hex(fake.code_byte(4096)))
        if with_filter:
            seccomp_allow.apply_allow_list(own_pid=os.getpid())
        out.append(undo_wall("libfake_gpu") if attack == "mremap" else copy_back(lib))
        out.append(hex(fake.code_byte(4096)))

    return in_forked_child(work, [])


def test_growing_a_file_mapping_undoes_the_wall_unless_the_filter_refuses_mremap(tmp_path: Path):
    """The wall leaves the library's other file mappings in place, and they still refer to the file:
    growing one over the walled pages' file offsets reads the GPU code back from the page cache (no
    open, so Landlock never sees it). The control shows the corpus's attack works on a real wall
    (``raise_wall``, unsealed, over a gcc-built library with a ``.nv_fatbin`` section; on an H100 it
    brought torch.relu back); the candidate's filter refuses mremap, so the GPU code stays gone."""
    from kag.core.trust import seccomp_allow

    lib = fake_gpu_library(tmp_path)
    assert walled_then_attacked(lib, "mremap", sealed=False) == ["0x5a", "libfake_gpu.so", "0x0",
                                                                 "wall undone: 1 ranges", "0x5a"]
    if not seccomp_allow.available():
        pytest.skip("needs libseccomp")
    assert walled_then_attacked(lib, "mremap", with_filter=True, sealed=False) == [
        "0x5a", "libfake_gpu.so", "0x0", "mremap refused: EPERM", "0x0"]


@pytest.mark.skipif(not seal_works(), reason="needs mseal (Linux 6.10+)")
def test_sealed_walled_pages_cannot_be_written_back_or_remapped(tmp_path: Path):
    """Bytes the solution brings itself (its compiler could read the library: ``.incbin`` puts them in
    its own module) written back over the wall: the control (no wall) shows the route; the wall's
    pages refuse the mprotect (a write-sealed file's, sealed or not), and sealed ones the mremap route
    too, with no help from the filter."""
    lib = fake_gpu_library(tmp_path)
    assert walled_then_attacked(lib, "copy", wall=False) == ["0x5a", "", "0x5a", "copied back", "0x5a"]  # the route
    # the covering pages are a write-sealed file's: not writable even unsealed; sealed, not even remappable
    assert walled_then_attacked(lib, "copy", sealed=False) == ["0x5a", "libfake_gpu.so", "0x0", "EACCES", "0x0"]
    got = walled_then_attacked(lib, "copy")
    assert got[:3] == ["0x5a", "libfake_gpu.so", "0x0"] and got[3] in ("EPERM", "EACCES") and got[4] == "0x0", got
    got = walled_then_attacked(lib, "mremap")
    assert got[:3] == ["0x5a", "libfake_gpu.so", "0x0"] and got[3].startswith("mremap refused") and got[4] == "0x0"


def test_every_folder_a_candidate_may_read_is_scanned_for_gpu_code():
    """A copy of a library with GPU code anywhere the candidate can read (/usr/lib, /opt, a conda
    prefix) could be loaded fresh with its code intact: the scan covers what Landlock lets it read,
    not only site-packages and the CUDA toolkit."""
    from kag.core.trust.fatbin_wall import library_roots

    roots = library_roots()
    for folder in ("/usr", "/opt", os.path.realpath(sys.prefix)):
        if os.path.isdir(folder):
            assert any(folder == r or folder.startswith(r + "/") for r in roots), (folder, roots)
    assert not any(r.startswith(("/proc", "/sys", "/etc")) for r in roots)


def test_the_section_cache_sees_a_library_added_where_one_was(tmp_path: Path, monkeypatch):
    import shutil

    from kag.core.trust import fatbin_wall

    lib = fake_gpu_library(tmp_path)
    pkg = tmp_path / "root" / "pkg" / "lib"
    pkg.mkdir(parents=True)
    shutil.copy(lib, pkg / "libfirst.so")
    monkeypatch.setattr(fatbin_wall, "library_roots", lambda: [str(tmp_path / "root")])
    cache = tmp_path / "cache"
    first = fatbin_wall.fatbin_sections(str(cache))
    assert list(first) == [str(pkg / "libfirst.so")] and first[str(pkg / "libfirst.so")][1] == 3 * 4096
    shutil.copy(lib, pkg / "libsecond.so")  # deep in the tree: the root's folders do not change
    assert sorted(fatbin_wall.fatbin_sections(str(cache))) == [str(pkg / "libfirst.so"), str(pkg / "libsecond.so")]
