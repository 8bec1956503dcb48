#!/usr/bin/env bash
# Fair timing under load on one GPU (rewards beside other work equal rewards alone), one mode a call:
#   launch    bench/scripts/launch_bound.py: a launch-bound ReLU alone, beside 8 builds on the default
#             build cores, beside 8 builds on every core (KAG_BUILD_CORES=all, the code before c0e0aed),
#             alone again
#   skipped   bench/scripts/serve_http.py --backend cuda: the case where an honest 0.1 ms solution was
#             flagged as skipping work (kag eval --concurrency 2 and kag serve --http, 32 evaluations each)
#   corpus    every CUDA case of the adversarial corpus, with timing
# Needs: one NVIDIA GPU, CUDA torch, nvcc, a host of several cores (the measurements were made on 16);
# KernelBench levels 1-3 in $KAG_KERNELBENCH (default .kb).
# Writes: launch_bound.{md,json,log}, serve_http.{json,log} or adversarial.{log,json,md} to
# $KAG_BENCH_OUT (default bench/out/gpu_timing_beside_builds/).
#   bash bench/scripts/gpu_timing_beside_builds.sh launch|skipped|corpus
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
echo "cores: $(nproc)"
case "${1:-launch}" in
launch)
  step "bench/scripts/launch_bound.py --backend cuda"
  timeout 570 python3 bench/scripts/launch_bound.py --backend cuda --out "$OUT/launch_bound.md" --json "$OUT/launch_bound.json" \
    2>&1 | tee "$OUT/launch_bound.log" | tail -30
  ;;
skipped)
  step "bench/scripts/serve_http.py --backend cuda"
  timeout 570 python3 bench/scripts/serve_http.py --backend cuda --json "$OUT/serve_http.json" 2>&1 | tee "$OUT/serve_http.log" | tail -40
  ;;
corpus)
  step "bench/scripts/adversarial.py --jobs 4 (every CUDA case, timed)"
  timeout 560 python3 bench/scripts/adversarial.py --jobs 4 > "$OUT/adversarial.log" 2>&1
  echo "corpus exit $?"; tail -70 "$OUT/adversarial.log" | cut -c1-170
  ;;
esac
