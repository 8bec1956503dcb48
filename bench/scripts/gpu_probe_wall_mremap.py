"""The fatbin wall against growing a file mapping, in bare processes on a GPU, one per
step, so each starts clean:

  walled      the wall raised (the judge's section table), then torch.relu: must fail
  undone      the wall raised unsealed, then the attack (tests/adversarial/cases/wall_mremap_python):
              grow what is left of libtorch_cuda's file mapping over the walled pages; then
              torch.relu: runs if the attack works with neither defence (the control)
  filtered    unsealed, with the candidate's seccomp filter loaded before the attack: mremap refused,
              torch.relu fails
  sealed      the wall as the candidate raises it (sealed, mseal), no filter: the attack fails

    python bench/scripts/gpu_probe_wall_mremap.py     # wall_mremap.json to $OUT when set
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

STEP = r"""
import json, os, sys
import torch
from kag.core.trust import fatbin_wall, seccomp_allow
step = sys.argv[1]
torch.cuda.init(); torch.empty(1, device="cuda")
fatbin_wall.preload("cuda")
walled = fatbin_wall.raise_wall(sections=fatbin_wall.fatbin_sections(os.environ.get("KAG_CACHE_DIR")),
                                sealed=step in ("walled", "sealed"))
out = {"step": step, "walled": len(walled), "sealed": sum(1 for n in walled if fatbin_wall.SEALED.get(n))}
if step != "walled":
    if step == "filtered":
        seccomp_allow.apply_allow_list(own_pid=os.getpid())
    src = open(sys.argv[2]).read().split("class ModelNew")[0].replace("import cuda_extension", "")
    ns = {}
    exec(compile(src, sys.argv[2], "exec"), ns)
    import io, contextlib
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        ns["undo_wall"]()
    out["attack"] = buf.getvalue().strip()
try:
    x = torch.randn(1 << 20, device="cuda")
    y = torch.relu(x)
    torch.cuda.synchronize()
    out["relu"] = "ran, right" if bool((y == x.clamp_min(0)).all()) else "ran, wrong"
except Exception as exc:
    out["relu"] = f"failed: {str(exc).splitlines()[0][:120]}"
print(json.dumps(out))
"""


def main() -> None:
    attack = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "adversarial", "cases",
                          "wall_mremap_python", "cuda", "model_new.py")
    rows = []
    for step in ("walled", "undone", "filtered", "sealed"):
        proc = subprocess.run([sys.executable, "-c", STEP, step, os.path.abspath(attack)], capture_output=True,
                              text=True, timeout=300)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        rows.append(json.loads(line[-1]) if line else {"step": step, "rc": proc.returncode,
                                                      "stderr": proc.stderr[-600:]})
        print(json.dumps(rows[-1]), flush=True)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "wall_mremap.json"), "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
