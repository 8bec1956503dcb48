#!/usr/bin/env bash
# One device call on the final evaluator: the examples through kag score's evaluator (the level2/14
# GEMM shortcut 2 x 50 checks, to see near misses settled by the float64 reference), then every CUDA
# case of the adversarial corpus with timing. Logs go to $OUT.
source bench/device_env.sh
step "examples (level2/14 with 50 checks, twice; then four examples with 5 checks)"
timeout 150 python3 bench/examples.py gemm_divide_sum_scaling --num-checks 50 --repeat 2 > "$OUT/examples_near_miss.log" 2>&1
mv "$OUT/examples.json" "$OUT/examples_near_miss.json"
grep -v '^{' "$OUT/examples_near_miss.log" | tail -8 | cut -c1-300
timeout 170 python3 bench/examples.py diag_matmul gemm_divide_sum_scaling relu softmax > "$OUT/examples.log" 2>&1
grep -v '^{' "$OUT/examples.log" | tail -10 | cut -c1-300
step "adversarial corpus (CUDA), with timing"
timeout 330 python3 bench/adversarial.py --jobs 4 > "$OUT/adversarial.log" 2>&1
tail -56 "$OUT/adversarial.log" | cut -c1-160
