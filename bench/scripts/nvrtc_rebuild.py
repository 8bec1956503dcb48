"""Rebuild after a one-kernel edit: kag's nvrtc backend vs its cuda (nvcc) backend, through kag's
own build (confined compiler, signed object cache), as the agent's `bash utils/compile.sh` runs it.

    python3 bench/scripts/nvrtc_rebuild.py [--edits 5] [--op relu] [--binding]

For each backend: a cold build of the example (fresh cache), then --edits builds each after an edit
of the kernel file only (a new comment line: the units that #include that file compile again, then
the link; every other unit comes from the cache). Prints the seconds of each and the median.
With --binding: the cuda backend only, each edit in the binding (the unit compiled against torch's
headers), once with the precompiled torch header (a store of its own, built by an untimed first
build) and once with KAG_PCH_DIR=off.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kag.core.eval.orchestrator.build import build_solution
from kag.core.plugins import Plugins
from kag.core.records import Solution

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(op: str, flavour: str) -> Solution:
    folder = EXAMPLES / op / flavour
    return Solution(model_new=(folder / "model_new.py").read_text(),
                    kernels={p.name: p.read_text() for p in (folder / "kernels").iterdir()})


def cold_then_edits(sol: Solution, backend, name: str, n: int, tmp: Path) -> tuple[float, list[float], set[str]]:
    """A cold build of ``sol`` in ``tmp``, then ``n`` builds each after a comment line added to file
    ``name``: (cold seconds, each edit's seconds, the units the edits recompiled)."""
    out, cache = tmp / "out", tmp / "cache"
    start = time.perf_counter()
    res = build_solution(sol, backend, out, cache_dir=cache)
    cold = time.perf_counter() - start
    assert res.ok, res.log
    edits, rebuilt = [], set()
    for i in range(n):
        sol.kernels[name] += f"\n// edit {i} {time.time()}\n"
        start = time.perf_counter()
        res = build_solution(sol, backend, out, cache_dir=cache)
        edits.append(time.perf_counter() - start)
        assert res.ok, res.log
        rebuilt.update(res.compiled)
    return cold, edits, rebuilt


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--op", default="relu")
    parser.add_argument("--binding", action="store_true", help="edit the binding instead (cuda, pch on/off)")
    args = parser.parse_args()
    if args.binding:
        binding_edits(args)
        return
    plugins = Plugins(load_entrypoints=False)
    rows = []
    for backend_name, flavour in (("cuda", "cuda"), ("nvrtc", "nvrtc")):
        backend = plugins.create("backend", backend_name)
        sol = load(args.op, flavour)
        kernel = f"{args.op}.cu"
        with tempfile.TemporaryDirectory() as tmp:
            cold, edits, rebuilt = cold_then_edits(sol, backend, kernel, args.edits, Path(tmp))
        rows.append((backend_name, cold, edits))
        print(f"{backend_name:6s} cold {cold:6.2f} s   one-kernel edit: " + " ".join(f"{e:.2f}" for e in edits)
              + f"   median {statistics.median(edits):.2f} s   recompiled per edit: {sorted(rebuilt)} + link",
              flush=True)
    (cuda_name, _, cuda_edits), (_, _, nvrtc_edits) = rows
    print(f"nvrtc rebuild is {statistics.median(cuda_edits) / statistics.median(nvrtc_edits):.1f}x faster than "
          f"{cuda_name} (median of {args.edits} one-kernel edits)")


def binding_edits(args: argparse.Namespace) -> None:
    """A binding edit with the precompiled torch header and without it (cuda backend)."""
    import os

    backend = Plugins(load_entrypoints=False).create("backend", "cuda")
    binding = f"{args.op}_binding.cpp"
    for label, pch in (("pch on", None), ("pch off", "off")):
        sol = load(args.op, "cuda")
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["KAG_PCH_DIR"] = pch or str(Path(tmp) / "pch")
            cold, edits, rebuilt = cold_then_edits(sol, backend, binding, args.edits, Path(tmp))
            print(f"cuda {label:7s} cold {cold:6.2f} s (with the header's own build when on)   binding edit: "
                  + " ".join(f"{e:.2f}" for e in edits) + f"   median {statistics.median(edits):.2f} s   "
                  f"recompiled: {sorted(rebuilt)} + link", flush=True)


if __name__ == "__main__":
    main()
