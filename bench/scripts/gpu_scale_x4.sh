#!/usr/bin/env bash
# `kag eval` throughput over the GPUs of one host (4 x H200/H100): replayed KernelBench episodes through
# `local` and `ray`, one GPU against all, the same verdicts checked (bench/scripts/scale.py).
# Needs: NVIDIA GPUs, CUDA torch, nvcc; KernelBench in $KAG_KERNELBENCH (default .kb); for the Ray
# stages Ray wheels in $KAG_RAY_WHEELS (default .wheels, `python3 bench/scripts/ray_wheels.py`).
# Writes: each stage's table (.md, .json) and the timelines (runs/*/timeline.{jsonl,png}) to $KAG_BENCH_OUT.
#   bash bench/scripts/gpu_scale_x4.sh warm local
#   bash bench/scripts/gpu_scale_x4.sh warm ray nodes
#   bash bench/scripts/gpu_scale_x4.sh overhead
# Stages (one cache, $KAG_CACHE_DIR, for all of them: rates are of warm baselines, as in RL):
#   warm   every task once at all GPUs (fills the baseline cache; its table is the cold rate)
#   local  local:1 over the tasks once, local:all over them REPEAT times (default 2): the same mix
#   ray    the same through a Ray cluster started before (`ray start --head`, outside the timed run)
#   nodes  two Ray nodes on this host with disjoint GPUs (0-1 and 2-3), the tasks once: verdicts as local's
#   overhead  Ray's cost on one GPU: local:1, ray:1, local:1, ray:1 over SMALL_IDS (default 19,21,23, level 1) after a
#          warm-up of those tasks, the cluster started before (the number: each executor's mean rate)
# IDS (level 1) and IDS2 (level 2) choose the tasks (default: 15 of level 1 and level2/14, 16 tasks).
# RAY_ONE=0 leaves out the ray stage's ray:1 run; OVERHEAD_WARM=0 the overhead stage's warm-up (after `warm`).
# PACK=1 leaves one archive, $OUT/scale.tgz, instead of the files (a device that returns few files).
source "$(dirname "$0")/env.sh"
IDS="${IDS:-5,12,19-31}"
IDS2="${IDS2:-14}"
REPEAT="${REPEAT:-2}"
scale() {  # NAME then scale.py's arguments
  local name=$1; shift
  timeout "${SCALE_TIMEOUT:-560}" python3 bench/scripts/scale.py --kernelbench "$KAG_KERNELBENCH" --ids "$IDS" \
    --level2-ids "$IDS2" --timeline --keep "$OUT/runs/$name" --json "$OUT/$name.json" "$@" > "$OUT/$name.md" \
    2> "$OUT/$name.log"
  echo "rc=$?"; grep -v '^picture' "$OUT/$name.md" | grep -A30 '^device'
  # what comes back: each run's timeline (lines, picture) and results, flat in $OUT (the runs' folders are too deep)
  for run in "$OUT/runs/$name"/*-*-*/; do
    [ -d "$run" ] || continue
    for f in timeline.jsonl timeline.png results.jsonl; do
      [ -f "$run/$f" ] && cp "$run/$f" "$OUT/$name.$(basename "$run").$f"
    done
  done
  rm -rf "$OUT/runs/$name"
}
ray_up() {
  python3 -c "import ray" 2>/dev/null || python3 -m pip install -q --no-index --find-links "${KAG_RAY_WHEELS:-.wheels}" ray 2>&1 | tail -2
  python3 -c "import ray; print('ray', ray.__version__)" || return 1
}
nvidia-smi -L
for stage in "$@"; do
  case "$stage" in
    warm)
      step "warm: every task once, all GPUs (cold cache)"
      scale warm --configs local:all ;;
    local)
      step "local: 1 GPU over the tasks once, all GPUs over them ${REPEAT} times"
      scale local1 --configs local:1
      scale localall --repeat "$REPEAT" --configs local:all ;;
    ray)
      step "ray: a cluster started before the timed runs"
      ray_up || continue
      ray stop --force >/dev/null 2>&1
      ray start --head --disable-usage-stats --include-dashboard=false > "$OUT/ray_start.log" 2>&1 || { tail "$OUT/ray_start.log"; continue; }
      export RAY_ADDRESS=127.0.0.1:6379
      [ "${RAY_ONE:-1}" = 1 ] && scale ray1 --configs ray:1
      scale rayall --repeat "$REPEAT" --configs ray:all
      unset RAY_ADDRESS; ray stop --force >/dev/null 2>&1 ;;
    nodes)
      step "two Ray nodes on one host, GPUs 0-1 and 2-3"
      ray_up || continue
      ray stop --force >/dev/null 2>&1
      CUDA_VISIBLE_DEVICES=0,1 ray start --head --num-gpus 2 --disable-usage-stats --include-dashboard=false > "$OUT/ray_nodes.log" 2>&1
      CUDA_VISIBLE_DEVICES=2,3 ray start --address 127.0.0.1:6379 --num-gpus 2 --disable-usage-stats >> "$OUT/ray_nodes.log" 2>&1
      python3 -c "import ray; ray.init(address='127.0.0.1:6379'); print('nodes', len([n for n in ray.nodes() if n['Alive']]), ray.cluster_resources().get('GPU'))" 2>&1 | tail -1
      RAY_ADDRESS=127.0.0.1:6379 scale nodes --configs ray:all
      ray stop --force >/dev/null 2>&1 ;;
    overhead)
      step "Ray's overhead on one GPU: local and ray alternated, warm"
      ray_up || continue
      ray stop --force >/dev/null 2>&1
      ray start --head --disable-usage-stats --include-dashboard=false > "$OUT/ray_start.log" 2>&1 || { tail "$OUT/ray_start.log"; continue; }
      [ "${OVERHEAD_WARM:-1}" = 1 ] && IDS="${SMALL_IDS:-19,21,23}" IDS2="" scale overhead_warm --configs local:1
      RAY_ADDRESS=127.0.0.1:6379 IDS="${SMALL_IDS:-19,21,23}" IDS2="" scale overhead --configs local:1,ray:1,local:1,ray:1
      ray stop --force >/dev/null 2>&1 ;;
    *) echo "unknown stage $stage" ;;
  esac
done
if [ "${PACK:-0}" = 1 ]; then
  tar czf /tmp/kag-scale.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/kag-scale.tgz "$OUT/scale.tgz"
  ls -la "$OUT/scale.tgz"
fi
