"""The nvrtc backend's compiler and linker, run by kag's build as confined subprocesses.

Trusted side's tool, like nvcc (kag.core.eval.orchestrator.build runs it under Landlock in the unit's folder):
``compile`` turns one ``kernels/*.cu`` into an object that is JSON, the CUBIN NVRTC made (base64)
and the parameter types of every ``extern "C" __global__`` function in the file, read from the
source; ``link`` writes ``cuda_extension.py``, which holds every object and, imported in the
candidate, loads the CUBINs and exposes one launcher per kernel (kag.plugins.backends.nvrtc_runtime).
No host compiler and no nvcc run: NVRTC compiles device code in-process in a fraction of a second.

    python -m kag.plugins.backends.nvrtc_compile compile --arch sm_90a [-I DIR] SRC OBJ
    python -m kag.plugins.backends.nvrtc_compile link OBJ... -o OUT
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
from pathlib import Path

from kag.plugin import strip_cpp_comments

EXTERN_C_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+'
                             r'(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)')
CXX_KERNEL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
                        r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")
QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct"}


def parameter_types(params: str) -> list[str]:
    """``const float* __restrict__ x, int n`` -> ``["float*", "int"]`` (qualifiers and names dropped)."""
    types = []
    for param in (p.strip() for p in params.split(",")):
        if not param or param == "void":
            continue
        stars = param.count("*")
        words = [w for w in re.findall(r"[A-Za-z_]\w*", param) if w not in QUALIFIERS]
        if len(words) > 1:
            words = words[:-1]  # the parameter's name
        types.append(" ".join(words) + "*" * stars)
    return types


def kernel_signatures(source: str) -> tuple[dict[str, list[str]], list[str]]:
    """(extern "C" kernels -> parameter types, kernels that are not extern "C")."""
    text = strip_cpp_comments(source, keep_strings=True)
    found = {name: parameter_types(params) for name, params in EXTERN_C_KERNEL.findall(text)}
    mangled = [name for name in CXX_KERNEL.findall(text) if name not in found]
    return found, mangled


def compile_source(src: Path, arch: str, includes: list[str]) -> dict[str, object]:
    from cupy_backends.cuda.libs import nvrtc

    source = src.read_text()
    kernels, mangled = kernel_signatures(source)
    if mangled:
        raise SystemExit(f"{src}: error: {', '.join(mangled)}: the nvrtc backend launches kernels by name, so "
                         f"declare them extern \"C\" __global__ void ...")
    if not kernels:
        raise SystemExit(f"{src}: error: no extern \"C\" __global__ kernel in this file")
    options = [f"--gpu-architecture={arch}", "-default-device", "--std=c++17", "-use_fast_math",
               *[f"--include-path={d}" for d in ["."] + includes]]
    prog = nvrtc.createProgram(source, src.name, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, options)
        except nvrtc.NVRTCError:
            raise SystemExit(nvrtc.getProgramLog(prog).strip() or f"{src}: error: NVRTC failed") from None
        cubin = nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)
    return {"source": src.name, "arch": arch, "nvrtc": ".".join(map(str, nvrtc.getVersion())),
            "cubin": base64.b64encode(cubin).decode(), "kernels": kernels}


MODULE_TEMPLATE = '''"""cuda_extension, built by kag's nvrtc backend from kernels/*.cu: one launcher per kernel.

    cuda_extension.<kernel>(grid, block, *args, shared_mem=0)

launches on torch's current stream; a tensor argument goes to a pointer parameter, a number to a
scalar one (converted to the parameter's C type).
"""
from kag.plugins.backends.nvrtc_runtime import load_kernels as _load_kernels

OBJECTS = {objects!r}
globals().update(_load_kernels(OBJECTS))
'''


def link(objects: list[Path], out: Path) -> None:
    loaded = [json.loads(o.read_text()) for o in objects]
    seen: dict[str, str] = {}
    for obj in loaded:
        for name in obj["kernels"]:
            if name in seen:
                raise SystemExit(f"kernels/{obj['source']}: error: kernel {name} is also defined in "
                                 f"kernels/{seen[name]}; kernel names must be unique")
            seen[name] = obj["source"]
    out.write_text(MODULE_TEMPLATE.format(objects=loaded))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="nvrtc_compile")
    sub = parser.add_subparsers(dest="cmd", required=True)
    comp = sub.add_parser("compile")
    comp.add_argument("--arch", required=True)
    comp.add_argument("-I", dest="includes", action="append", default=[])
    comp.add_argument("src", type=Path)
    comp.add_argument("obj", type=Path)
    lnk = sub.add_parser("link")
    lnk.add_argument("objects", nargs="+", type=Path)
    lnk.add_argument("-o", dest="out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.cmd == "compile":
        args.obj.write_text(json.dumps(compile_source(args.src, args.arch, args.includes)))
    else:
        link(args.objects, args.out)


if __name__ == "__main__":
    sys.exit(main())
