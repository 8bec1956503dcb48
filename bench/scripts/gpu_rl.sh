#!/usr/bin/env bash
# RL on one GPU, in one run of about 5 minutes (every phase has its own time limit):
#   (a) the copy-digit learning check: warm-up PPO, plain torch engine, 40 steps -> curve PNG + metrics
#   (b) `kag train warmup` and `kag train agentic` with engine = "deepspeed", ZeRO-2, bf16, for a few
#       steps each (plus a resume from the DeepSpeed checkpoint) -> step time and tokens/s
# then prints a table.
# Needs: one NVIDIA GPU, CUDA torch, transformers, matplotlib, and DeepSpeed: wheels in
# $KAG_RL_WHEELS (default .whl: DeepSpeed 0.19.8 built with DS_BUILD_OPS=0 and the deps a bare CUDA
# torch image lacks: hjson, pydantic, pydantic-core, annotated-types, typing-inspection,
# typing-extensions), installed into a scratch folder; KAG_RL_WHEELS=none uses what PYTHONPATH has.
# Writes: rl_gpu.log, learning_<device>_metrics.jsonl, warmup_copy_digit_<device>.png,
# deepspeed_{warmup,agentic}_metrics.jsonl and deepspeed.json to $KAG_BENCH_OUT (default
# bench/out/gpu_rl/).
#   bash bench/scripts/gpu_rl.sh
# Building the wheels on a machine with network (4.7 MB):
#   DS_BUILD_OPS=0 pip wheel --no-deps deepspeed==0.19.8 -w .whl
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 hjson typing-extensions
# (einops, msgpack, ninja, numpy, packaging, psutil, py-cpuinfo, tqdm and torch were already on the GPU machine.)
# KAG_RL_DEVICE=cpu KAG_RL_QUICK=1 KAG_RL_WHEELS=none runs the same script on a CPU in about a minute (a smoke
# test; DeepSpeed then comes from PYTHONPATH and falls back to its CPU accelerator).
set -uo pipefail
OUT="${KAG_BENCH_OUT:-}"  # a relative path is taken from where the script was started
if [ -n "$OUT" ]; then mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd); fi
cd "$(dirname "$0")/../.." || exit 1
OUT="${OUT:-$PWD/bench/out/gpu_rl}"
mkdir -p "$OUT"
export OUT
DEVICE=${KAG_RL_DEVICE:-cuda}
QUICK=${KAG_RL_QUICK:-0}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

WHEELS=${KAG_RL_WHEELS:-.whl}  # KAG_RL_WHEELS=none: use what PYTHONPATH already has
if [ -d "$WHEELS" ] && ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  site=$(mktemp -d)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$WHEELS"/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=$site:$PWD
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export DS_BUILD_OPS=0
exec > >(tee "$OUT/rl_gpu.log") 2>&1
WORK=$(mktemp -d)
echo "== $(date -u +%FT%TZ) device=$DEVICE quick=$QUICK work=$WORK"
python3 - <<'EOF'
import torch
print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
try:
    import deepspeed
    print("deepspeed", deepspeed.__version__)
except Exception as exc:  # reported; phase (b) then fails with the same reason
    print("deepspeed import failed:", type(exc).__name__, exc)
EOF

if [ "$QUICK" = 1 ]; then LEARN_STEPS=3; DS_STEPS=2; else LEARN_STEPS=40; DS_STEPS=4; fi

# One TOML for every run: the learning check's settings (tests/plugins/algorithms/test_learning.py).
cat > "$WORK/rl.toml" <<EOF
[train]
model = "tiny"
environment = "copy-digit"
seed = 0
device = "$DEVICE"
actor_lr = 1e-3
critic_lr = 3e-3
episodes_per_step = 32
mini_batch_size = 16
micro_batch_size = 32
ppo_epochs = 2
max_new_tokens = 2
tensorboard = false

[train.warmup]
steps = $LEARN_STEPS
output_dir = "$WORK/learn"

[environments.copy-digit]
digits = "0123"
digit_reward = 0.2
EOF

kag_train() {  # STAGE LIMIT_S ARGS...: one `kag train` through the real CLI, its own time limit
  local stage=$1 limit=$2; shift 2
  timeout "$limit" python3 -m kag.cli.main train "$stage" --config "$WORK/rl.toml" "$@" > "$WORK/$stage.summary" 2> "$WORK/$stage.err"
  local rc=$?
  tail -n 5 "$WORK/$stage.err" | grep -v '^\s*$' | sed 's/^/    /'
  echo "   kag train $stage $* -> rc=$rc"
  return $rc
}

echo "== (a) learning check: warmup PPO, torch engine, $LEARN_STEPS steps"
kag_train warmup 300 || echo "learning check FAILED"
cp "$WORK/learn/metrics.jsonl" "$OUT/learning_${DEVICE}_metrics.jsonl" 2>/dev/null

echo "== (b) DeepSpeed ZeRO-2 bf16: warmup and agentic, $DS_STEPS steps each"
DS=(--set engine='"deepspeed"' --set zero_stage=2 --set bf16=true)
kag_train warmup 150 "${DS[@]}" --set steps=$DS_STEPS --set output_dir="\"$WORK/ds_warmup\"" \
  || echo "deepspeed warmup FAILED"
# resume: one more step from the DeepSpeed checkpoint just written
kag_train warmup 120 "${DS[@]}" --set steps=$((DS_STEPS + 1)) --set output_dir="\"$WORK/ds_warmup\"" \
  || echo "deepspeed warmup resume FAILED"
kag_train agentic 150 "${DS[@]}" --set steps=$DS_STEPS --set max_turns=2 --set env_options='{turns = 2}' \
  --set max_new_tokens=3 --set output_dir="\"$WORK/ds_agentic\"" || echo "deepspeed agentic FAILED"
cp "$WORK/ds_warmup/metrics.jsonl" "$OUT/deepspeed_warmup_metrics.jsonl" 2>/dev/null
cp "$WORK/ds_agentic/metrics.jsonl" "$OUT/deepspeed_agentic_metrics.jsonl" 2>/dev/null

WORK=$WORK DEVICE=$DEVICE DS_STEPS=$DS_STEPS python3 - <<'EOF'
import json, os
from pathlib import Path

work, out, device = Path(os.environ["WORK"]), Path(os.environ["OUT"]), os.environ["DEVICE"]
ds_steps = int(os.environ["DS_STEPS"])

def rows(path):
    p = path / "metrics.jsonl"
    return [json.loads(r) for r in p.read_text().splitlines() if r.strip()] if p.is_file() else []

def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else float("nan")

lines = []
learn = rows(work / "learn")
if learn:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    k = min(5, len(learn))
    start, end = mean([r["reward_mean"] for r in learn[:k]]), mean([r["reward_mean"] for r in learn[-k:]])
    rs, re_ = mean([r.get("right_frac") for r in learn[:k]]), mean([r.get("right_frac") for r in learn[-k:]])
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["step"] for r in learn], [r["reward_mean"] for r in learn], label="mean reward")
    ax.plot([r["step"] for r in learn], [r.get("right_frac", 0) for r in learn], label="right copies")
    ax.set_xlabel("PPO step (32 episodes)")
    ax.set_title(f"warmup PPO, tiny model, copy-digit ({device})")
    ax.legend(); fig.tight_layout(); fig.savefig(out / f"warmup_copy_digit_{device}.png", dpi=100)
    lines.append(f"learning check ({device}, torch engine): reward {start:.3f} -> {end:.3f}, right copies "
                 f"{rs:.3f} -> {re_:.3f} over {len(learn)} steps, {sum(r['step_s'] for r in learn):.0f}s, "
                 f"{'RISES' if end > start + 0.2 else 'DOES NOT RISE CLEARLY'}")
else:
    lines.append("learning check: no metrics (the run failed; see rl_gpu.log)")

result = {"device": device, "engine": "deepspeed", "zero_stage": 2, "bf16": True, "stages": {}}
try:
    import deepspeed, torch
    result.update(deepspeed=deepspeed.__version__, torch=torch.__version__,
                  gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
except Exception as exc:
    result["deepspeed_error"] = f"{type(exc).__name__}: {exc}"
for stage in ("warmup", "agentic"):
    rs_ = rows(work / f"ds_{stage}")
    summary = (work / f"{stage}.summary")
    steady = rs_[1:] or rs_  # the first step includes CUDA/kernel warm-up
    result["stages"][stage] = {
        "steps": len(rs_), "resumed_to": rs_[-1]["step"] if rs_ else 0,
        "step_s_mean": mean([r["step_s"] for r in steady]), "rollout_s_mean": mean([r["rollout_s"] for r in steady]),
        "tokens_per_s_mean": mean([r["tokens_per_s"] for r in steady]),
        "first_step_s": rs_[0]["step_s"] if rs_ else None,
        "reward_mean_last": rs_[-1]["reward_mean"] if rs_ else None,
        "turns_mean": mean([r["turns"] for r in rs_]),
        "traj_tokens_mean": mean([r["traj_tokens"] for r in rs_]),
        "actor_grad_norm_mean": mean([r.get("actor_grad_norm") for r in rs_]),
        "critic_grad_norm_mean": mean([r.get("critic_grad_norm") for r in rs_]),
        "ok": bool(rs_) and len(rs_) >= ds_steps,
    }
(out / "deepspeed.json").write_text(json.dumps(result, indent=1))
lines.append("")
lines.append(f"DeepSpeed ZeRO-2 bf16 on {result.get('gpu') or device} (deepspeed {result.get('deepspeed')}, "
             f"torch {result.get('torch')}); steps after the first:")
lines.append(f"{'stage':<9} {'steps':>5} {'step s':>8} {'rollout s':>9} {'tokens/s':>9} {'turns':>5} {'ok':>3}")
for stage, s in result["stages"].items():
    lines.append(f"{stage:<9} {s['steps']:>5} {s['step_s_mean']:>8.3f} {s['rollout_s_mean']:>9.3f} "
                 f"{s['tokens_per_s_mean']:>9.0f} {s['turns_mean']:>5.2f} {'yes' if s['ok'] else 'NO':>3}")
print("\n".join(lines))
EOF
echo "== done $(date -u +%FT%TZ); files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
