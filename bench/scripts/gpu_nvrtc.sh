#!/usr/bin/env bash
# The nvrtc backend on one GPU: versions, rebuild after a one-kernel edit (nvrtc vs nvcc), the same
# reward for the examples that have both flavours, and the GPU tests (an nvrtc solution scores like
# its nvcc twin; cupy's library kernels are foreign to provenance). SKIP_REBUILD=1 skips the rebuild.
# Needs: one NVIDIA GPU, CUDA torch, nvcc, cupy (its NVRTC).
# Writes: rebuild.log and score_<example>_<backend>.{json,err} to $KAG_BENCH_OUT (default
# bench/out/gpu_nvrtc/).
#   bash bench/scripts/gpu_nvrtc.sh
source "$(dirname "$0")/env.sh"
step "versions"
python3 -c "import cupy, torch; from cupy_backends.cuda.libs import nvrtc; print('cupy', cupy.__version__, 'nvrtc', nvrtc.getVersion(), 'torch', torch.__version__, torch.cuda.get_device_name())"
if [ -z "${SKIP_REBUILD:-}" ]; then
  step "rebuild after a one-kernel edit"
  timeout 200 python3 bench/scripts/nvrtc_rebuild.py --edits 5 2>&1 | tee "$OUT/rebuild.log"
fi
step "the same reward: nvrtc vs cuda"
for op in relu:19_ReLU sigmoid:21_Sigmoid tanh:22_Tanh; do
  name=${op%%:*}; task=examples/kernelbench_sample/level1/${op##*:}.py
  for backend in cuda nvrtc; do
    timeout 150 kag score --task "$task" --solution "examples/$name/$backend" --backend "$backend" --json \
      > "$OUT/score_${name}_${backend}.json" 2> "$OUT/score_${name}_${backend}.err"
    python3 - "$OUT/score_${name}_${backend}.json" "$name" "$backend" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as exc:
    print(f"{sys.argv[2]:8s} {sys.argv[3]:6s} no result: {exc}"); sys.exit()
rw = r.get("reward")
rw = rw.get("value") if isinstance(rw, dict) else rw
t = r.get("times_ms") or {}
print(f"{sys.argv[2]:8s} {sys.argv[3]:6s} correct={r.get('correct')} reward={rw} "
      f"candidate={t.get('candidate')} ms eager={t.get('eager')} compile={t.get('compile')} "
      f"vs_eager={r.get('speedup_vs_eager')} vs_compile={r.get('speedup_vs_compile')} "
      f"violations={[v['guard'] for v in r.get('violations', [])]} error={(r.get('error') or '')[:200]}")
PY
  done
done
step "GPU tests"
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/plugins/backends/test_nvrtc.py -rA 2>&1 | tail -25
