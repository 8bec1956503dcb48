"""Fixed file (read-only). Build, guard and check model_new.py against model.py.

Runs kag's trusted evaluator (`kag verify`): it builds kernels/, runs the anti-hacking guards and
compares ModelNew with Model on fresh random inputs. Prints whether it compiled, any guard
violations, and the first mismatching output with its max abs/rel error.
Usage: python3 utils/verification.py
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
    args = sys.argv[1:]
    if os.environ.get("KAG_BRIDGE"):
        if args[:1] == ["--kag-bridge-action"]:  # compile.sh forwards its request through here
            return via_bridge(args[1], args[2:])
        return via_bridge("verify", args)
    meta_path = ROOT / ".kag" / "workspace.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    cmd = [sys.executable, "-m", "kag.cli.main", "verify", "--workspace", str(ROOT)]
    if meta.get("backend"):
        cmd += ["--backend", str(meta["backend"])]
    return subprocess.call(cmd + args, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
