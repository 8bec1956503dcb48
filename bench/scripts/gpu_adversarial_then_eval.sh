#!/usr/bin/env bash
# Two parts. "adversarial": every CUDA case of the adversarial corpus through the real evaluator
# (with timing), then the start of `kag eval` over 21 KernelBench level-1 tasks with the replay
# solutions, killed (SIGKILL) after SECONDS_FOR_EVAL. "eval": the same eval resumed (runs/eval20 kept
# between the two) to the end, or killed again after SECONDS_FOR_EVAL.
# Needs: one NVIDIA GPU, CUDA torch, nvcc; KernelBench levels 1-3 in $KAG_KERNELBENCH (default .kb).
# Writes: adversarial.{log,json,md} and eval20.tgz (runs/eval20 packed) to $KAG_BENCH_OUT (default
# bench/out/gpu_adversarial_then_eval/); the eval itself runs in runs/eval20 of the checkout.
#   bash bench/scripts/gpu_adversarial_then_eval.sh adversarial|eval SECONDS_FOR_EVAL
source "$(dirname "$0")/env.sh"
part="${1:-adversarial}"; eval_s="${2:-150}"
if [ "$part" = adversarial ]; then
  step "adversarial corpus (CUDA), with timing"
  timeout 430 python3 bench/scripts/adversarial.py --jobs 4 2>&1 | tee "$OUT/adversarial.log" | cut -c1-200
fi
step "kag eval over 21 level-1 tasks (replay), at most $eval_s s in this call"
mkdir -p runs/eval20
ls runs/eval20; wc -l runs/eval20/results.jsonl 2>/dev/null
timeout -s KILL "$eval_s" kag eval --dataset "kernelbench:$KAG_KERNELBENCH" --level 1 --ids 5,12,19-32,47,48,49,53,88 \
  --policy replay --policy-option path=examples/replays/cuda --out runs/eval20 --concurrency 3 2>&1 | tail -5
echo "kag eval exit status: $? (137: killed, as planned when the time ran out)"
wc -l runs/eval20/results.jsonl 2>/dev/null
tar czf "$OUT/eval20.tgz" runs/eval20
ls -la runs/eval20 | head
