#!/usr/bin/env bash
# One device call for issue 3 (and the analysis step): the evaluator benchmark with 10 repeats and
# the phase breakdown of `kag score`, the examples not scored before on the GPU, and `kag profile`
# on an untouched workspace (the paper's analysis step). Logs go to $OUT.
source bench/device_env.sh
step "evaluator benchmark"
timeout 300 python3 bench/evaluator.py --repeats 10 2>&1 | tee "$OUT/evaluator.log" | grep -v '^{' | tail -22
step "examples"
timeout 200 python3 bench/examples.py gelu leaky_relu sum_reduction diag_matmul gemm_divide_sum_scaling > "$OUT/examples.log" 2>&1
grep -v '^{' "$OUT/examples.log" | tail -9
step "analysis step: kag profile on an untouched workspace"
kag workspace .kb/level1/23_Softmax.py /tmp/ws_softmax --backend cuda
(cd /tmp/ws_softmax && timeout 120 python3 utils/profiling.py) 2>&1 | tee "$OUT/analysis.log" | tail -30
