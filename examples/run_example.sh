#!/usr/bin/env bash
# The main job: `kag run` on a bundled example with the replay policy. The agent writes the
# kernels, compiles, verifies, profiles and is rewarded -- on the GPU when there is one (the
# KernelBench task), else on the CPU backend (the example's CPU twin, a smaller copy of the task).
# Usage: bash examples/run_example.sh [EXAMPLE] [OUT]      (default: relu, runs/EXAMPLE)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
name="${1:-relu}"
out="${2:-runs/$name}"
if python3 -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  backend=cuda
  task="$here/kernelbench_sample/$(cat "$here/$name/task.txt")"
  [ -f "$task" ] || task="kernelbench:$(sed -E 's#level([0-9]+)/([0-9]+)_.*#level\1/\2#' "$here/$name/task.txt")"
else
  backend=cpu
  task="$here/$name/cpu/model.py"
fi
exec kag run --task "$task" --backend "$backend" --policy replay \
  --policy-option "path=$here/$name/$backend/replay.json" --out "$out"
