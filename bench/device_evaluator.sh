#!/usr/bin/env bash
# One device call for issue 3: the cost of importing torch, then the evaluator benchmark (10 repeats,
# the timeline of a cached `kag score`, an evaluation with a warm judge). Logs go to $OUT.
source bench/device_env.sh
step "import torch, twice (the floor of a one-shot kag score: its judge imports torch)"
for i in 1 2; do python3 -c "import time; t=time.time(); import torch; a=time.time(); import torch._dynamo; print(f'import torch {a-t:.2f} s, torch._dynamo {time.time()-a:.2f} s')"; done
step "evaluator benchmark"
timeout 420 python3 bench/evaluator.py --repeats 10 2>&1 | tee "$OUT/evaluator.log" | grep -v '^{' | tail -60
