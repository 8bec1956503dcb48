"""How long the judge's output comparison (kag.core.eval.judge.compare) takes on the GPU, per output size.

The judge compares every check's output with the reference's: for KernelBench's largest level-1
outputs (4096 x 393216 fp32, 6.4 GB) this is part of every evaluation's latency.
Usage: python bench/scripts/compare_speed.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    import torch

    from kag.core.eval.judge.compare import compare_outputs
    from kag.plugins.tolerances.rules import CudaAgentTolerance

    tol = CudaAgentTolerance().tolerance
    print(f"compare_outputs on {torch.cuda.get_device_name(0)} (torch {torch.__version__})")
    for shape, dtype in [((4096, 393216), torch.float32), ((4096, 4096), torch.float32),
                         ((4096, 393216), torch.float16)]:
        ref = torch.randn(shape, device="cuda", dtype=dtype)
        out = ref + 1e-4 * torch.randn_like(ref)
        times = []
        for _ in range(4):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            found = compare_outputs(ref, out, tol)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        gb = ref.numel() * ref.element_size() / 1e9
        print(f"  {str(tuple(shape)):>16} {str(dtype):>14} {gb:6.2f} GB per tensor: median "
              f"{1000 * statistics.median(times[1:]):8.1f} ms (first {1000 * times[0]:.1f} ms), mismatch {found}")
        del ref, out
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
