#!/usr/bin/env bash
# One device call for issue 19: bench/load.py on the GPU, 8 evaluations at once through kag serve
# and through kag eval --concurrency 8, then the faults; the table lands in $OUT/h100.md (commit it
# as bench/load/h100.md). --budget-s keeps the call under the device's 600 s: a phase that would
# start later is listed as not run.
source bench/device_env.sh
step "load test, cuda, N=8"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 580 python3 bench/load.py --backend cuda --n 8 --num-timed 30 --faults --fault-after 20 \
  --budget-s 330 --timeout 400 --work /tmp/kag-load --out "$OUT/h100.md" > "$OUT/load.log" 2>&1
echo "exit status $?"; tail -40 "$OUT/load.log"
