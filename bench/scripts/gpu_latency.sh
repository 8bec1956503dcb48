#!/usr/bin/env bash
# The evaluator's latency on one GPU: import times, the judge's output comparison, then the evaluator
# benchmark (builds, one-shot kag score with its timeline, kag score through `kag serve`, a warm
# judge, 10 repeated timings); with --examples, also the examples and the main job (kag run, replay,
# level2/14).
# Needs: one NVIDIA GPU, CUDA torch, nvcc; KernelBench levels 1-3 in $KAG_KERNELBENCH (default .kb).
# Writes: compare_speed.log, evaluator.{log,json} (and examples.{log,json}, run_gemm.log) to
# $KAG_BENCH_OUT (default bench/out/gpu_latency/).
#   bash bench/scripts/gpu_latency.sh [--examples]
source "$(dirname "$0")/env.sh"
step "import torch and torch._dynamo, twice"
for i in 1 2; do python3 -c "import time; t=time.time(); import torch; a=time.time(); import torch._dynamo; print(f'import torch {a-t:.2f} s, torch._dynamo {time.time()-a:.2f} s')"; done
step "output comparison speed"
timeout 60 python3 bench/scripts/compare_speed.py 2>&1 | tee "$OUT/compare_speed.log"
step "evaluator benchmark"
timeout 480 python3 bench/scripts/evaluator.py --repeats 10 2>&1 | tee "$OUT/evaluator.log" | grep -v '^{' | tail -120
if [ "${1:-}" = "--examples" ]; then
  step "examples through kag score's evaluator"
  timeout 200 python3 bench/scripts/examples.py diag_matmul gemm_divide_sum_scaling relu softmax > "$OUT/examples.log" 2>&1
  grep -v '^{' "$OUT/examples.log" | tail -10
  step "main job: kag run (replay) on level2/14"
  run_dir=$(mktemp -d)/run_gemm
  timeout 90 bash examples/run_example.sh gemm_divide_sum_scaling "$run_dir" > "$OUT/run_gemm.log" 2>&1
  tail -12 "$OUT/run_gemm.log"
fi
