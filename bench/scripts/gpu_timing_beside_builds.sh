#!/usr/bin/env bash
# Device calls for issue 19's last measurements (nvidia-h100-x1), run from the repo root with .kb
# (KernelBench levels 1-3) carried; logs and tables go to $OUT:
#   bash bench/device_issue19.sh launch    bench/launch_bound.py: a launch-bound ReLU alone, beside 8
#                                          builds on the default build cores, beside 8 builds on every
#                                          core (KAG_BUILD_CORES=all, the code before c0e0aed), alone
#   bash bench/device_issue19.sh skipped   bench/serve_http.py --backend cuda: the case where an honest
#                                          0.1 ms solution was flagged as skipping work (kag eval
#                                          --concurrency 2 and kag serve --http, 32 evaluations each)
#   bash bench/device_issue19.sh corpus    every CUDA case of the adversarial corpus, with timing
#                                          (the code since the last GPU run: keyed seeds, plain outputs)
source bench/device_env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
echo "cores: $(nproc)"
case "${1:-launch}" in
launch)
  step "bench/launch_bound.py --backend cuda"
  timeout 570 python3 bench/launch_bound.py --backend cuda --out "$OUT/launch_bound.md" --json "$OUT/launch_bound.json" \
    2>&1 | tee "$OUT/launch_bound.log" | tail -30
  ;;
skipped)
  step "bench/serve_http.py --backend cuda"
  timeout 570 python3 bench/serve_http.py --backend cuda --json "$OUT/serve_http.json" 2>&1 | tee "$OUT/serve_http.log" | tail -40
  ;;
corpus)
  step "bench/adversarial.py --jobs 4 (every CUDA case, timed)"
  timeout 560 python3 bench/adversarial.py --jobs 4 > "$OUT/adversarial.log" 2>&1
  echo "corpus exit $?"; tail -70 "$OUT/adversarial.log" | cut -c1-170
  ;;
esac
