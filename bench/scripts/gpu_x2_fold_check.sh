#!/usr/bin/env bash
# Device call (nvidia-h100-x2): bench/fold_check.py on the lazy ReLU and honest solutions, on both GPUs
# side by side. Carry [".kb"]. On 2026-11-25 (bench/trust_gpu/session5) the judge of that day's working
# tree read KAG_POST_CAL_RECHECK (1: repeat the re-check work before each calibrated hand-over); that
# experiment was dropped, and the variable now changes nothing: the two logs are two runs of the same.
source bench/device_env.sh
(CUDA_VISIBLE_DEVICES=0 KAG_POST_CAL_RECHECK=0 timeout 420 python3 bench/fold_check.py --repeat 3 \
   --cases lazy_output_harness,example_relu,example_sigmoid,example_softmax,tiny_honest > "$OUT/fold_plain.log" 2>&1) &
(CUDA_VISIBLE_DEVICES=1 KAG_POST_CAL_RECHECK=1 timeout 420 python3 bench/fold_check.py --repeat 3 \
   --cases lazy_output_harness,example_relu,example_sigmoid,example_softmax,tiny_honest > "$OUT/fold_recheck.log" 2>&1) &
wait
echo "== calibrated hand-overs after a dummy output only (GPU 0)"; grep -v '^{' "$OUT/fold_plain.log" | tail -17
echo "== calibrated hand-overs after the judge's re-check work (GPU 1)"; grep -v '^{' "$OUT/fold_recheck.log" | tail -17
