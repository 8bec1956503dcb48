"""Fixed file (read-only). Time model_new.py against eager PyTorch and torch.compile.

Runs kag's trusted evaluator (`kag profile`). Before you write any kernel it is the analysis
step: the reference's kernels (names, count, time share), the eager and compile times, the
target (compile time x 0.95) and the GPU's compute capability. Once model_new.py builds, it
prints your times in ms and the speedups.
Usage: python3 utils/profiling.py
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kag_bridge import via_bridge  # noqa: E402


def main() -> int:
    if os.environ.get("KAG_BRIDGE"):
        return via_bridge("profile", sys.argv[1:])
    meta_path = ROOT / ".kag" / "workspace.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    cmd = [sys.executable, "-m", "kag.cli.main", "profile", "--workspace", str(ROOT)]
    if meta.get("backend"):
        cmd += ["--backend", str(meta["backend"])]
    return subprocess.call(cmd + sys.argv[1:], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
