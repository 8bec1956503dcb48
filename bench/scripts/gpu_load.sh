#!/usr/bin/env bash
# The load test on one GPU: bench/scripts/load.py, 8 evaluations at once through kag serve and through
# kag eval --concurrency 8 (each reward against the same solution's alone), then the faults (a killed
# server, killed judges, a full cache disk). --budget-s keeps the run under 10 minutes: a phase that
# would start later is listed as not run.
# Needs: one NVIDIA GPU, CUDA torch, nvcc.
# Writes: h100.md (the table) and load.log to $KAG_BENCH_OUT (default bench/out/gpu_load/); the work
# folder is /tmp/kag-load.
#   bash bench/scripts/gpu_load.sh
source "$(dirname "$0")/env.sh"
step "load test, cuda, N=8"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 580 python3 bench/scripts/load.py --backend cuda --n 8 --num-timed 30 --faults --fault-after 20 \
  --budget-s 330 --timeout 400 --work /tmp/kag-load --out "$OUT/h100.md" > "$OUT/load.log" 2>&1
echo "exit status $?"; tail -40 "$OUT/load.log"
