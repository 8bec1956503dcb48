#!/usr/bin/env bash
# bench/scripts/fold_check.py on the lazy ReLU and honest solutions, on two GPUs side by side (GPU 0
# and GPU 1, 3 tries each). On 2026-11-25 (bench/results/2026-11-25-7d93fb6-h100x2/) the judge of that
# day's working tree read KAG_POST_CAL_RECHECK (1: repeat the re-check work before each calibrated
# hand-over); that experiment was dropped, and the variable now changes nothing: the two logs are two
# runs of the same.
# Needs: two NVIDIA GPUs on one host, CUDA torch, nvcc; KernelBench levels 1-3 in $KAG_KERNELBENCH
# (default .kb).
# Writes: fold_plain.log (GPU 0) and fold_recheck.log (GPU 1) to $KAG_BENCH_OUT (default
# bench/out/gpu_x2_fold_check/).
#   bash bench/scripts/gpu_x2_fold_check.sh
source "$(dirname "$0")/env.sh"
(CUDA_VISIBLE_DEVICES=0 KAG_POST_CAL_RECHECK=0 timeout 420 python3 bench/scripts/fold_check.py --repeat 3 \
   --cases lazy_output_harness,example_relu,example_sigmoid,example_softmax,tiny_honest > "$OUT/fold_plain.log" 2>&1) &
(CUDA_VISIBLE_DEVICES=1 KAG_POST_CAL_RECHECK=1 timeout 420 python3 bench/scripts/fold_check.py --repeat 3 \
   --cases lazy_output_harness,example_relu,example_sigmoid,example_softmax,tiny_honest > "$OUT/fold_recheck.log" 2>&1) &
wait
echo "== calibrated hand-overs after a dummy output only (GPU 0)"; grep -v '^{' "$OUT/fold_plain.log" | tail -17
echo "== calibrated hand-overs after the judge's re-check work (GPU 1)"; grep -v '^{' "$OUT/fold_recheck.log" | tail -17
