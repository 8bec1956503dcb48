#!/usr/bin/env bash
# `kag eval --plugin executor=ray` against `local` on one GPU: Ray installed from local wheels, the same
# pass/fail checked, both timed over the same KernelBench level-1 replays (the bundled sample).
# Needs: one NVIDIA GPU (more with CONFIGS=ray:1,ray:2,ray:all), CUDA torch, nvcc; Ray wheels in
# $KAG_RAY_WHEELS (default .wheels; `python3 bench/scripts/ray_wheels.py` writes them, 48 MiB) or Ray
# already installed.
# Writes: scale_gpu.{json,md} to $KAG_BENCH_OUT (default bench/out/gpu_scale_ray/). CONFIGS and IDS
# pick the configurations (default local:1,ray:1) and the level-1 ids (default 19,20,21,22,23,25).
#   bash bench/scripts/gpu_scale_ray.sh
source "$(dirname "$0")/env.sh"
WHEELS="${KAG_RAY_WHEELS:-.wheels}"
if [ -d "$WHEELS" ]; then
  step "install ray from $WHEELS"
  python3 -m pip install -q --no-index --find-links "$WHEELS" ray 2>&1 | tail -2
fi
python3 -c "import ray, torch; print('ray', ray.__version__, 'torch', torch.__version__)" || exit 1
step "bench/scripts/scale.py ${CONFIGS:=local:1,ray:1} over level-1 ids ${IDS:=19,20,21,22,23,25}"
timeout 560 python3 bench/scripts/scale.py --kernelbench examples/kernelbench_sample --ids "$IDS" --configs "$CONFIGS" \
  --json "$OUT/scale_gpu.json" 2>&1 | tee "$OUT/scale_gpu.md"
