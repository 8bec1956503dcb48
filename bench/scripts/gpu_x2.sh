#!/usr/bin/env bash
# Two GPUs of one host, one mode a call:
#   verify   GPU 0: the GPU tests (evaluate end to end, NVRTC, isolation); GPU 1, at the same time:
#            every CUDA case of the adversarial corpus, with timing
#   scale    bench/scripts/scale.py over level-1 replays: local:1 (cold caches), then ray:1, ray:2,
#            local:2, local:1 warm (CONFIGS and IDS change them)
#   stages   bench/scripts/scale_stages.py --backend cuda --workers 2 (the data filter, environment steps)
# Needs: two NVIDIA GPUs on one host, CUDA torch, nvcc; KernelBench levels 1-3 in $KAG_KERNELBENCH
# (default .kb); for scale and stages, Ray wheels in $KAG_RAY_WHEELS (default .wheels; `python3
# bench/scripts/ray_wheels.py` writes them) or Ray already installed. NVLink multicast is left off.
# Writes: pytest_gpu.log and adversarial.{log,json,md}, or scale_x2.{json,md}, or stages_x2.{md,log},
# to $KAG_BENCH_OUT (default bench/out/gpu_x2/).
#   bash bench/scripts/gpu_x2.sh verify|scale|stages
source "$(dirname "$0")/env.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
ray_install() {
  local wheels="${KAG_RAY_WHEELS:-.wheels}"
  [ -d "$wheels" ] && python3 -m pip install -q --no-index --find-links "$wheels" ray 2>&1 | tail -2
  python3 -c "import ray, torch; print('ray', ray.__version__, 'torch', torch.__version__, torch.cuda.device_count(), 'GPUs')" || exit 1
}
case "${1:-verify}" in
verify)
  step "GPU 0: pytest (evaluate, NVRTC, isolation) | GPU 1: adversarial corpus with timing"
  (CUDA_VISIBLE_DEVICES=0 KAG_TEST_KERNELBENCH="$KAG_KERNELBENCH" timeout 540 python3 -m pytest -q -p no:cacheprovider \
     tests/core/eval/orchestrator/test_evaluate_gpu.py tests/plugins/backends/test_nvrtc.py tests/core/trust/test_isolation.py \
     > "$OUT/pytest_gpu.log" 2>&1; echo "pytest exit $?" >> "$OUT/pytest_gpu.log") &
  (CUDA_VISIBLE_DEVICES=1 timeout 540 python3 bench/scripts/adversarial.py --jobs 4 > "$OUT/adversarial.log" 2>&1;
     echo "corpus exit $?" >> "$OUT/adversarial.log") &
  wait
  tail -25 "$OUT/pytest_gpu.log" | cut -c1-220
  tail -60 "$OUT/adversarial.log" | cut -c1-170
  ;;
scale)
  ray_install
  step "bench/scripts/scale.py ${CONFIGS:=local:1,ray:1,ray:2,local:2,local:1} over level-1 ids ${IDS:=19-26}"
  timeout 570 python3 bench/scripts/scale.py --kernelbench "$KAG_KERNELBENCH" --ids "$IDS" --configs "$CONFIGS" \
    --json "$OUT/scale_x2.json" 2>&1 | tee "$OUT/scale_x2.md"
  ;;
stages)
  ray_install
  step "bench/scripts/scale_stages.py --backend cuda --workers 2"
  timeout 570 python3 bench/scripts/scale_stages.py --backend cuda --workers 2 --out "$OUT/stages_x2.md" 2>&1 | tee "$OUT/stages_x2.log"
  ;;
esac
