#!/usr/bin/env bash
# The paper's five-stage training recipe (warmup -> collect -> rft -> value-pretrain -> agentic) on one
# GPU, in one run of at most ~8 minutes, through the real CLI:
#   1. `kag train recipe --config examples/train/recipe_h100.toml`, SIGKILLed after KILL_S (40) seconds
#      (a crash in the middle of a stage: nothing is saved on the way out)
#   2. the same command again: it resumes at the stage it stopped in (from that stage's checkpoint)
#      and runs to the end, or until the time budget runs out (then the report shows what ran)
#   3. `kag train report` -> report.md; then a table of the stages' first/last rewards
# Needs: one NVIDIA GPU with about 80 GB (an H100: examples/train/recipe_h100.toml is sized for it),
# CUDA torch, transformers, matplotlib; no vLLM, no DeepSpeed.
# Writes: recipe_h100/ in $KAG_BENCH_OUT (default bench/out/gpu_recipe/): report.md, recipe.json,
# STAGE/metrics.jsonl and STAGE/curves.png, the two runs' logs. Checkpoints and the trajectories stay
# in a scratch folder (not needed to read the results).
#   bash bench/scripts/gpu_recipe.sh
# CPU smoke test of the same script (a minute or two):
#   KAG_RECIPE_DEVICE=cpu KAG_RECIPE_QUICK=1 bash bench/scripts/gpu_recipe.sh
set -uo pipefail
OUT="${KAG_BENCH_OUT:-}"  # a relative path is taken from where the script was started
if [ -n "$OUT" ]; then mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd); fi
cd "$(dirname "$0")/../.." || exit 1
OUT="${OUT:-$PWD/bench/out/gpu_recipe}"
DEVICE=${KAG_RECIPE_DEVICE:-cuda}
QUICK=${KAG_RECIPE_QUICK:-0}
BUDGET_S=${KAG_RECIPE_BUDGET_S:-440}   # both runs together
KILL_S=${KAG_RECIPE_KILL_S:-40}   # early in the run; where it lands depends on the GPU (any point must resume)
RESULTS=$OUT/recipe_h100
WORK=$(mktemp -d)
RUN=$WORK/run
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
exec > >(tee "$RESULTS/recipe_gpu.log") 2>&1
echo "== $(date -u +%FT%TZ) device=$DEVICE quick=$QUICK budget=${BUDGET_S}s kill_after=${KILL_S}s run=$RUN"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"

SETS=(--set "device=$DEVICE")
if [ "$QUICK" = 1 ]; then
  SETS+=(--set episodes_per_step=8 --set mini_batch_size=8 --set micro_batch_size=8 --set save_every=1
         --set warmup.steps=4 --set collect.num_episodes=16 --set value-pretrain.steps=2 --set agentic.steps=3)
fi
RECIPE=(python3 -m kag.cli.main train recipe --config examples/train/recipe_h100.toml --run-dir "$RUN" "${SETS[@]}")

t0=$(date +%s)
echo "== run 1: killed with SIGKILL after ${KILL_S}s"
timeout -s KILL "$KILL_S" "${RECIPE[@]}" > "$RESULTS/run1.json" 2> "$RESULTS/run1.err"
echo "run 1 exit $? after $(( $(date +%s) - t0 ))s; stages finished: $(python3 -c "import json,sys; print(list(json.load(open(sys.argv[1]))['finished']))" "$RUN/recipe.json" 2>/dev/null)"
tail -n 3 "$RESULTS/run1.err"

left=$(( BUDGET_S - ($(date +%s) - t0) ))
echo "== run 2: the same command, resuming (${left}s left)"
timeout -s INT -k 60 "$left" "${RECIPE[@]}" > "$RESULTS/run2.json" 2> "$RESULTS/run2.err"
rc=$?
echo "run 2 exit $rc after $(( $(date +%s) - t0 ))s in all (130: the budget ran out, Ctrl-C'd at a step boundary; the report shows what ran)"
grep -E "^recipe:" "$RESULTS/run2.err"

python3 -m kag.cli.main train report "$RUN" >/dev/null || echo "report failed"
cp "$RUN/report.md" "$RUN/recipe.json" "$RESULTS/" 2>/dev/null
for stage in warmup collect rft value-pretrain agentic; do
  [ -d "$RUN/$stage" ] || continue
  mkdir -p "$RESULTS/$stage"
  cp "$RUN/$stage/metrics.jsonl" "$RUN/$stage/curves.png" "$RESULTS/$stage/" 2>/dev/null
done
python3 - "$RUN" <<'PY'
import json, sys
from pathlib import Path
from kag.plugins.algorithms.ppo.report import first_last
run = Path(sys.argv[1])
print(f"{'stage':<15} {'steps':>5} {'reward first->last':>20} {'expl.var last':>13} {'tok/s':>8} {'wall s':>7}  stage ids")
for stage in ("warmup", "collect", "rft", "value-pretrain", "agentic"):
    path = run / stage / "metrics.jsonl"
    if not path.is_file():
        print(f"{stage:<15} not run"); continue
    rows = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    fl = first_last(rows, "reward_mean")
    ev = [r["explained_variance"] for r in rows if isinstance(r.get("explained_variance"), float)]
    tps = [r["tokens_per_s"] for r in rows if isinstance(r.get("tokens_per_s"), float)]
    print(f"{stage:<15} {rows[-1]['step']:>5} {fl[0]:>9.3f} -> {fl[1]:<8.3f} {ev[-1] if ev else float('nan'):>13.3f} "
          f"{sum(tps) / max(len(tps), 1):>8.0f} {sum(r.get('step_s') or 0 for r in rows):>7.1f}  "
          f"{sorted({r['stage'] for r in rows})} steps {[r['step'] for r in rows][:3]}..{rows[-1]['step']}")
PY
echo "== done $(date -u +%FT%TZ); results in $RESULTS"
