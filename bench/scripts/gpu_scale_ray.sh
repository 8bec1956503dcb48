#!/usr/bin/env bash
# Device call for issue 17 (one GPU): install Ray from the carried wheels (python3 bench/ray_wheels.py
# writes .wheels here first, 48 MiB), check `kag eval --plugin executor=ray` gives the same pass/fail
# as `local`, and time both over the same KernelBench level-1 replays (the bundled sample).
# Run: carry [".wheels"], command `bash bench/device_scale.sh`. Multi-GPU: CONFIGS=ray:1,ray:2,ray:all.
source bench/device_env.sh
step "install ray from .wheels"
python3 -m pip install -q --no-index --find-links .wheels ray 2>&1 | tail -2
python3 -c "import ray, torch; print('ray', ray.__version__, 'torch', torch.__version__)" || exit 1
step "bench/scale.py ${CONFIGS:=local:1,ray:1} over level-1 ids ${IDS:=19,20,21,22,23,25}"
timeout 560 python3 bench/scale.py --kernelbench examples/kernelbench_sample --ids "$IDS" --configs "$CONFIGS" \
  --json "$OUT/scale_gpu.json" 2>&1 | tee "$OUT/scale_gpu.md"
