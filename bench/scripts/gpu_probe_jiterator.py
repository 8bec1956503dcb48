"""Whether PyTorch's run-time-compiled CUDA ops (the "jiterator": NVRTC compiles them from source text
kept in libtorch_cuda, not from its .nv_fatbin) still run behind the fatbin wall (a door the
wall does not close, found by reading). One fresh process: the wall raised as the candidate raises it
(sealed, the judge's section table), then each op once on the GPU; torch.relu as the control.

    python bench/scripts/gpu_probe_jiterator.py     # jiterator.json to $OUT when set
"""

from __future__ import annotations

import json
import os

import torch

from kag.core.trust import fatbin_wall

OPS = {
    "special.chebyshev_polynomial_t": lambda x: torch.special.chebyshev_polynomial_t(x, 3),
    "special.hermite_polynomial_h": lambda x: torch.special.hermite_polynomial_h(x, 3),
    "special.bessel_j0": lambda x: torch.special.bessel_j0(x),
    "special.airy_ai": lambda x: torch.special.airy_ai(x),
    "special.spherical_bessel_j0": lambda x: torch.special.spherical_bessel_j0(x),
    "relu (control, last: its code is in .nv_fatbin)": lambda x: torch.relu(x),
}


def main() -> None:
    torch.cuda.init()
    torch.empty(1, device="cuda")
    fatbin_wall.preload("cuda")
    walled = fatbin_wall.raise_wall(sections=fatbin_wall.fatbin_sections(os.environ.get("KAG_CACHE_DIR")))
    out: dict = {"walled": len(walled), "sealed": sum(1 for n in walled if fatbin_wall.SEALED.get(n)), "ops": {}}
    x = torch.rand(1 << 16, device="cuda")
    for name, op in OPS.items():
        try:
            y = op(x)
            torch.cuda.synchronize()
            ref = op(x.cpu())
            out["ops"][name] = "ran, right" if torch.allclose(y.cpu(), ref, rtol=1e-4, atol=1e-5, equal_nan=True) \
                else "ran, wrong"
        except Exception as exc:  # noqa: BLE001
            out["ops"][name] = f"failed: {str(exc).splitlines()[0][:100]}"
    print(json.dumps(out, indent=1))
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "jiterator.json"), "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
