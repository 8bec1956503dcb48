#!/usr/bin/env bash
# The examples through kag score's evaluator (the level2/14 GEMM shortcut with 2 x 50 checks, to see
# near misses settled by the float64 reference; then four examples with 5 checks), then every CUDA
# case of the adversarial corpus with timing.
# Needs: one NVIDIA GPU, CUDA torch, nvcc; KernelBench levels 1-3 in $KAG_KERNELBENCH (default .kb).
# Writes: examples_near_miss.{log,json}, examples.{log,json}, adversarial.{log,json,md} to
# $KAG_BENCH_OUT (default bench/out/gpu_examples_and_corpus/).
#   bash bench/scripts/gpu_examples_and_corpus.sh
source "$(dirname "$0")/env.sh"
step "examples (level2/14 with 50 checks, twice; then four examples with 5 checks)"
timeout 150 python3 bench/scripts/examples.py gemm_divide_sum_scaling --num-checks 50 --repeat 2 > "$OUT/examples_near_miss.log" 2>&1
mv "$OUT/examples.json" "$OUT/examples_near_miss.json"
grep -v '^{' "$OUT/examples_near_miss.log" | tail -8 | cut -c1-300
timeout 170 python3 bench/scripts/examples.py diag_matmul gemm_divide_sum_scaling relu softmax > "$OUT/examples.log" 2>&1
grep -v '^{' "$OUT/examples.log" | tail -10 | cut -c1-300
step "adversarial corpus (CUDA), with timing"
timeout 330 python3 bench/scripts/adversarial.py --jobs 4 > "$OUT/adversarial.log" 2>&1
tail -56 "$OUT/adversarial.log" | cut -c1-160
