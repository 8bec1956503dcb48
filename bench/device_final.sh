#!/usr/bin/env bash
# The last device call of a session with little device time left: examples on the GPU, the main
# job (kag run, replay) on a level-2 example, the evaluator benchmark, then the CUDA adversarial
# corpus until the time runs out. Each part has its own time limit; logs go to $OUT.
source bench/device_env.sh
step "examples"
timeout 170 python3 bench/examples.py diag_matmul gemm_divide_sum_scaling relu softmax > "$OUT/examples.log" 2>&1
grep -v '^{' "$OUT/examples.log" | tail -8
step "kag run (replay) on level2/14"
timeout 80 bash examples/run_example.sh gemm_divide_sum_scaling /tmp/run_gemm > "$OUT/run_gemm.log" 2>&1
tail -12 "$OUT/run_gemm.log"
step "evaluator benchmark"
timeout 130 python3 bench/evaluator.py --repeats 5 > "$OUT/evaluator.log" 2>&1; tail -12 "$OUT/evaluator.log"
step "adversarial (CUDA)"
timeout 170 python3 bench/adversarial.py --no-timing --jobs 4 > "$OUT/adversarial.log" 2>&1
tail -60 "$OUT/adversarial.log" | cut -c1-220
