#!/usr/bin/env bash
# A KernelBench single-file solution against its workspace twin: KernelBench level1/19_ReLU scored
# as the workspace examples/relu/cuda and as examples/relu/kernelbench/cuda (the same kernels in
# load_inline strings, read statically and built by kag). Prints both verdicts and speed-ups.
# Needs: one NVIDIA GPU, CUDA torch, nvcc (BACKEND=cpu: any CPU with a C++ compiler, scoring the CPU
# twins examples/relu/cpu and examples/relu/kernelbench/cpu the same way).
# Writes: workspace.{json,err} and single_file.{json,err} to $KAG_BENCH_OUT (default
# bench/out/kernelbench_single_file/).
#   bash bench/scripts/kernelbench_single_file.sh
source "$(dirname "$0")/env.sh"
BACKEND="${BACKEND:-cuda}"
TASK=examples/kernelbench_sample/level1/19_ReLU.py
[ "$BACKEND" = cpu ] && TASK=examples/relu/cpu/model.py
[ "$BACKEND" = cuda ] && nvidia-smi --query-gpu=name --format=csv,noheader
for name in workspace single_file; do
  sol=examples/relu/$BACKEND; [ "$name" = single_file ] && sol=examples/relu/kernelbench/$BACKEND
  step "kag score --backend $BACKEND $sol"
  timeout 270 kag score --backend "$BACKEND" --task "$TASK" --solution "$sol" --json > "$OUT/$name.json" 2> "$OUT/$name.err"
  echo "exit status $?"; tail -5 "$OUT/$name.err"
done
step "both"
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
rows = []
for name in ("workspace", "single_file"):
    try:
        r = json.loads(Path(sys.argv[1], f"{name}.json").read_text())
    except (OSError, ValueError) as exc:
        print(f"{name}: no result ({exc})"); continue
    t = r["times_ms"]
    rows.append(name)
    print(f"{name:12s} ok={r['correct'] and not r['error']!s:5s} reward={r['reward'] and r['reward']['value']} "
          f"candidate={t.get('candidate')} ms eager={t.get('eager')} ms compile={t.get('compile')} ms "
          f"vs_eager={r['speedup_vs_eager']} vs_compile={r['speedup_vs_compile']} error={(r['error'] or '')[:300]} "
          f"meta={ {k: r['metadata'][k] for k in ('converted_from', 'converted_files') if k in r['metadata']} }")
PY
