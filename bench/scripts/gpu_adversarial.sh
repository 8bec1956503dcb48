#!/usr/bin/env bash
# Every CUDA case of the adversarial corpus through the real evaluator, with timing, 4 evaluations in
# flight (the GPU pool still times one at a time).
# Needs: one NVIDIA GPU, CUDA torch, nvcc; KernelBench levels 1-3 in $KAG_KERNELBENCH (default .kb).
# Writes: adversarial.{log,json,md} to $KAG_BENCH_OUT (default bench/out/gpu_adversarial/).
#   bash bench/scripts/gpu_adversarial.sh
source "$(dirname "$0")/env.sh"
step "adversarial corpus (CUDA), with timing"
timeout 560 python3 bench/scripts/adversarial.py --jobs 4 2>&1 | tee "$OUT/adversarial.log" | cut -c1-200
