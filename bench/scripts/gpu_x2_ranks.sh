#!/usr/bin/env bash
# Two GPUs of one host, one mode a call:
#   corpus  GPU 1: the CUDA corpus with timing; GPU 0 meanwhile: bench/scripts/fold_check.py (lazy output
#           vs honest, the hand-over figures)
#   ranks   PPO across GPUs, ZeRO-3 on 2 ranks (NCCL): the one-step equivalence check
#           (tests/plugins/algorithms/ranks_step.py), then warm-up PPO of an 84M-parameter model on 1 GPU
#           and on 2 GPUs; prints tokens/s of each (STEPS=N: steps of each run, default 6)
# Needs: two NVIDIA GPUs on one host, CUDA torch, nvcc; KernelBench levels 1-3 in $KAG_KERNELBENCH
# (default .kb) for corpus; for ranks, DeepSpeed: wheels in $KAG_BENCH_WHEELS (default .whl: DeepSpeed
# 0.19.8 and its missing deps, built as bench/scripts/gpu_rl.sh says), installed into a scratch folder,
# or none there and DeepSpeed already importable. NVLink multicast is left off.
# Writes: adversarial.{log,json,md} and fold_check.log, or eq.log, warmup_{1,2}gpu.log and
# warmup_{1,2}gpu_metrics.jsonl, to $KAG_BENCH_OUT (default bench/out/gpu_x2_ranks/); the model and
# the runs in /tmp/kag-ranks.
#   bash bench/scripts/gpu_x2_ranks.sh corpus|ranks
source "$(dirname "$0")/env.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TOKENIZERS_PARALLELISM=false DS_BUILD_OPS=0
WHEELS="${KAG_BENCH_WHEELS:-.whl}"
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  site=$(mktemp -d)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$WHEELS"/*.whl || exit 1
  export PYTHONPATH="$site:$PYTHONPATH"
fi
W=/tmp/kag-ranks; mkdir -p $W
[ -d $W/model ] || python3 - <<'PY'
# a ~85M-parameter Llama (8 layers, hidden 1024) with the tiny character tokenizer, saved locally
from kag.plugins.algorithms.ppo.tiny import make_tiny_model, make_tiny_tokenizer
tok = make_tiny_tokenizer()
model = make_tiny_model(len(tok), seed=0, hidden=1024, layers=8)
model.save_pretrained("/tmp/kag-ranks/model"); tok.save_pretrained("/tmp/kag-ranks/model")
print("model parameters:", sum(p.numel() for p in model.parameters()))
PY
cat > $W/rl.toml <<TOML
[train]
model = "$W/model"
environment = "copy-digit"
seed = 0
device = "cuda"
engine = "deepspeed"
zero_stage = 3
bf16 = true
actor_lr = 1e-5
critic_lr = 1e-5
episodes_per_step = 64
mini_batch_size = 32
micro_batch_size = 16
ppo_epochs = 1
max_new_tokens = 48
tensorboard = false
save_every = 0
steps = ${STEPS:-6}

[environments.copy-digit]
digits = "0123"
TOML
tokens() {  # metrics.jsonl -> mean tokens/s and step s over the steps after the first
  python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][1:]
tps = sum(r["tokens_per_s"] for r in rows) / len(rows); step = sum(r["step_s"] for r in rows) / len(rows)
print(json.dumps({"steps_measured": len(rows), "tokens_per_s": round(tps, 1), "step_s": round(step, 3),
                  "episodes": rows[-1].get("episodes"), "reward_mean_last": rows[-1].get("reward_mean")}))
PY
}
case "${1:-corpus}" in
corpus)
  step "GPU 1: the CUDA corpus with timing | GPU 0: bench/scripts/fold_check.py"
  (CUDA_VISIBLE_DEVICES=1 timeout 500 python3 bench/scripts/adversarial.py --jobs 4 > "$OUT/adversarial.log" 2>&1
   echo "corpus exit $?" >> "$OUT/adversarial.log") &
  (CUDA_VISIBLE_DEVICES=0 timeout 400 python3 bench/scripts/fold_check.py --repeat 3 > "$OUT/fold_check.log" 2>&1
   echo "fold_check exit $?" >> "$OUT/fold_check.log") &
  wait
  tail -62 "$OUT/adversarial.log" | cut -c1-170; grep -v '^{' "$OUT/fold_check.log" | tail -16
  ;;
ranks)
  step "one PPO step on 1 rank vs 2 ranks (ZeRO-3, NCCL, fp32): the same parameters"
  rm -rf $W/eq; mkdir -p $W/eq
  KAG_RANKS_DEVICE=cuda CUDA_VISIBLE_DEVICES=0 timeout 150 python3 tests/plugins/algorithms/ranks_step.py $W/eq > "$OUT/eq.log" 2>&1
  KAG_RANKS_DEVICE=cuda timeout 150 python3 -m torch.distributed.run --standalone --nproc_per_node 2 \
    tests/plugins/algorithms/ranks_step.py $W/eq >> "$OUT/eq.log" 2>&1; echo "eq exit $?"
  python3 - <<'PY'
import json, torch
d = "/tmp/kag-ranks/eq"
a, b = (torch.load(f"{d}/actor-{n}.pt") for n in (1, 2))
one, two = (json.load(open(f"{d}/metrics-{n}.json")) for n in (1, 2))
print("max parameter difference after the step:", max(float((a[k].float() - b[k].float()).abs().max()) for k in a))
for k in ("policy_loss", "value_loss", "actor_grad_norm", "critic_grad_norm", "advantage_sum_sq"):
    print(f"  {k}: 1 rank {one[k]:.6g}  2 ranks {two[k]:.6g}")
PY
  step "warm-up PPO, ZeRO-3 bf16, 1 GPU, then 2 GPUs"
  CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -m kag.cli.main train warmup --config $W/rl.toml \
    --set output_dir="\"$W/one\"" > "$OUT/warmup_1gpu.log" 2>&1; echo "warmup 1 GPU exit $?"
  cp $W/one/metrics.jsonl "$OUT/warmup_1gpu_metrics.jsonl"
  timeout 200 python3 -m torch.distributed.run --standalone --nproc_per_node 2 -m kag.cli.main train warmup \
    --config $W/rl.toml --set output_dir="\"$W/two\"" > "$OUT/warmup_2gpu.log" 2>&1; echo "warmup 2 GPUs exit $?"
  cp $W/two/metrics.jsonl "$OUT/warmup_2gpu_metrics.jsonl"
  echo "1 GPU: $(tokens $W/one/metrics.jsonl)"
  echo "2 GPUs: $(tokens $W/two/metrics.jsonl)"
  grep -v "Warning\|warn" "$OUT/warmup_2gpu.log" | tail -5
  ;;
esac
