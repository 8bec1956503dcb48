#!/usr/bin/env bash
# One device call for issue 3/5 evidence: the example solutions scored on the GPU, the evaluator
# benchmark, and `kag run` with the replay policy (the main job) on a level-2 example.
# Run from the repo root with KernelBench levels 1-3 carried in .kb.
source bench/device_env.sh
step "examples scored on the GPU"
timeout 260 python3 bench/examples.py ${EXAMPLES:-relu sigmoid tanh gelu leaky_relu softmax sum_reduction diag_matmul gemm_divide_sum_scaling} \
  > "$OUT/examples.log" 2>&1; tail -14 "$OUT/examples.log"
step "kag run, replay policy, level2/14 (main job on the GPU)"
timeout 90 bash examples/run_example.sh gemm_divide_sum_scaling /tmp/run_gemm > "$OUT/run_gemm.log" 2>&1
tail -14 "$OUT/run_gemm.log"; cp /tmp/run_gemm/summary.json "$OUT/run_gemm_summary.json" 2>/dev/null
step "evaluator benchmark"
timeout 200 python3 bench/evaluator.py --repeats ${REPEATS:-10} > "$OUT/evaluator.log" 2>&1; tail -14 "$OUT/evaluator.log"
