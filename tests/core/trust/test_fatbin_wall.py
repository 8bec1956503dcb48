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
