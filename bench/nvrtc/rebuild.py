"""Rebuild after a one-kernel edit: kag's nvrtc backend vs its cuda (nvcc) backend, through kag's
own build (confined compiler, signed object cache), as the agent's `bash utils/compile.sh` runs it.

    python3 bench/nvrtc/rebuild.py [--edits 5] [--op relu]

For each backend: a cold build of the example (fresh cache), then --edits builds each after an edit
of the kernel file only (a new comment line: the units that read that file compile again, then the
link; every other unit comes from the cache; with nvcc the kernel's binding reads the .cu too). Prints the seconds of each and the median.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kag.core.eval.build import build_solution
from kag.core.plugins import Plugins
from kag.core.records import Solution

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(op: str, flavour: str) -> Solution:
    folder = EXAMPLES / op / flavour
    return Solution(model_new=(folder / "model_new.py").read_text(),
                    kernels={p.name: p.read_text() for p in (folder / "kernels").iterdir()})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--op", default="relu")
    args = parser.parse_args()
    plugins = Plugins(load_entrypoints=False)
    rows = []
    for backend_name, flavour in (("cuda", "cuda"), ("nvrtc", "nvrtc")):
        backend = plugins.create("backend", backend_name)
        sol = load(args.op, flavour)
        kernel = f"{args.op}.cu"
        with tempfile.TemporaryDirectory() as tmp:
            out, cache = Path(tmp) / "out", Path(tmp) / "cache"
            start = time.perf_counter()
            res = build_solution(sol, backend, out, cache_dir=cache)
            cold = time.perf_counter() - start
            assert res.ok, res.log
            edits, rebuilt = [], set()
            for i in range(args.edits):
                sol.kernels[kernel] += f"\n// edit {i} {time.time()}\n"
                start = time.perf_counter()
                res = build_solution(sol, backend, out, cache_dir=cache)
                edits.append(time.perf_counter() - start)
                assert res.ok, res.log
                rebuilt.update(res.compiled)
        rows.append((backend_name, cold, edits))
        print(f"{backend_name:6s} cold {cold:6.2f} s   one-kernel edit: " + " ".join(f"{e:.2f}" for e in edits)
              + f"   median {statistics.median(edits):.2f} s   recompiled per edit: {sorted(rebuilt)} + link",
              flush=True)
    (cuda_name, _, cuda_edits), (_, _, nvrtc_edits) = rows
    print(f"nvrtc rebuild is {statistics.median(cuda_edits) / statistics.median(nvrtc_edits):.1f}x faster than "
          f"{cuda_name} (median of {args.edits} one-kernel edits)")


if __name__ == "__main__":
    main()
