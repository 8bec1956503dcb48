#!/usr/bin/env bash
# Device calls for issues 4 and 5. Part "adversarial": every CUDA case of the adversarial corpus
# through the real evaluator (with timing), then the start of `kag eval` over 20 KernelBench level-1
# tasks with the replay solutions, killed (SIGKILL) when the call's time is up. Part "eval": resume
# the same eval (runs/eval20 carried back) to the end. The eval folder is also packed into $OUT.
# Usage: bash bench/device_adversarial_eval.sh adversarial|eval SECONDS_FOR_EVAL
source bench/device_env.sh
part="${1:-adversarial}"; eval_s="${2:-150}"
if [ "$part" = adversarial ]; then
  step "adversarial corpus (CUDA), with timing"
  timeout 430 python3 bench/adversarial.py --jobs 4 2>&1 | tee "$OUT/adversarial.log" | cut -c1-200
fi
step "kag eval over 20 level-1 tasks (replay), at most $eval_s s in this call"
mkdir -p runs/eval20
ls runs/eval20; wc -l runs/eval20/results.jsonl 2>/dev/null
timeout -s KILL "$eval_s" kag eval --dataset kernelbench:.kb --level 1 --ids 5,12,19-32,47,48,49,53,88 \
  --policy replay --policy-option path=examples/replays/cuda --out runs/eval20 --concurrency 3 2>&1 | tail -5
echo "kag eval exit status: $? (137: killed, as planned when the time ran out)"
wc -l runs/eval20/results.jsonl 2>/dev/null
tar czf "$OUT/eval20.tgz" runs/eval20
ls -la runs/eval20 | head
