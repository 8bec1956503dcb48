#!/usr/bin/env bash
# The example solutions scored on the GPU, `kag run` with the replay policy (the main job) on the
# level-2 example, and the evaluator benchmark.
# Needs: one NVIDIA GPU, CUDA torch, nvcc; KernelBench levels 1-3 in $KAG_KERNELBENCH (default .kb).
# Writes: examples.{log,json}, run_gemm.log, run_gemm_summary.json, evaluator.{log,json} to
# $KAG_BENCH_OUT (default bench/out/gpu_examples_run_evaluator/). EXAMPLES=a b ... picks the examples,
# REPEATS=N the evaluator benchmark's repeated timings (default 10).
#   bash bench/scripts/gpu_examples_run_evaluator.sh
source "$(dirname "$0")/env.sh"
step "examples scored on the GPU"
timeout 260 python3 bench/scripts/examples.py ${EXAMPLES:-relu sigmoid tanh gelu leaky_relu softmax sum_reduction diag_matmul gemm_divide_sum_scaling} \
  > "$OUT/examples.log" 2>&1; tail -14 "$OUT/examples.log"
step "kag run, replay policy, level2/14 (main job on the GPU)"
run_dir=$(mktemp -d)/run_gemm
timeout 90 bash examples/run_example.sh gemm_divide_sum_scaling "$run_dir" > "$OUT/run_gemm.log" 2>&1
tail -14 "$OUT/run_gemm.log"; cp "$run_dir/summary.json" "$OUT/run_gemm_summary.json" 2>/dev/null
step "evaluator benchmark"
timeout 200 python3 bench/scripts/evaluator.py --repeats ${REPEATS:-10} > "$OUT/evaluator.log" 2>&1; tail -14 "$OUT/evaluator.log"
