#!/usr/bin/env bash
# One device call for issue 4: every CUDA case of the adversarial corpus through the real
# evaluator, with timing, 4 evaluations in flight (the GPU pool still times one at a time).
# Writes adversarial.{log,json,md} to $OUT.
source bench/device_env.sh
step "adversarial corpus (CUDA), with timing"
timeout 560 python3 bench/adversarial.py --jobs 4 2>&1 | tee "$OUT/adversarial.log" | cut -c1-200
