#!/usr/bin/env bash
# The trusted evaluator's measurement and isolation on a GPU, in stages (one call or several):
#   smoke     kag doctor, then 6 corpus cases
#   corpus    every CUDA case of the adversarial corpus with the static guards on (timed calls where a
#             case needs them); the tables move to static_on/
#   nostatic  every CUDA case a static guard can see, with every static guard off
#   fidelity  kag's speed-up vs CUPTI kernel times (bench/scripts/timing_fidelity.py --iters 20;
#             FIDELITY_ONLY=a,b limits the tasks). The 2026-11-23 results were printed by its
#             predecessor, bench/fidelity.py (`git show 76e240a^:bench/fidelity.py`), which also took
#             FIDELITY_ARGS=--reference-calibration; FIDELITY_ARGS is passed on as it is
#   latency   kag score through kag serve on level-1 ReLU, 3 times, then twice more traced
#             (bench/scripts/trace_timeline.py puts the phase marks of every process in time order)
#   timed     the cases whose verdict depends on the timing, static guards on and off
#   retry     three static-off cases (cublas_forbidden, tf32_flag, background_thread)
#   gputests  the GPU test files
# Needs: one NVIDIA GPU, CUDA torch, nvcc; KernelBench levels 1-3 in $KAG_KERNELBENCH (default .kb).
# Writes: each stage's log and tables to $KAG_BENCH_OUT (default bench/out/gpu_trust_stages/).
#   bash bench/scripts/gpu_trust_stages.sh smoke fidelity ...
source "$(dirname "$0")/env.sh"
for stage in "$@"; do
  case "$stage" in
    smoke)
      step "kag doctor"
      kag doctor
      step "smoke: six corpus cases on the GPU"
      timeout 300 python3 bench/scripts/adversarial.py --jobs 2 \
        --only example_relu,timer_harness_object,skip_cpp_counter,judge_memory_python,escape_cpp_fork,spot_hooks_cpp \
        2>&1 | tee "$OUT/smoke.log" | cut -c1-220 ;;
    corpus)
      step "adversarial corpus (CUDA), static guards on"
      timeout 330 python3 bench/scripts/adversarial.py --jobs 4 --no-timing 2>&1 | tee "$OUT/corpus.log" | cut -c1-200
      mkdir -p "$OUT/static_on" && mv "$OUT"/adversarial.* "$OUT/static_on/" ;;
    nostatic)
      step "adversarial corpus (CUDA), every static guard off"
      timeout 250 python3 bench/scripts/adversarial.py --jobs 4 --no-timing --no-static-guards --static-relevant 2>&1 \
        | tee "$OUT/nostatic.log" | cut -c1-200 ;;
    fidelity)
      step "timing fidelity vs CUPTI kernel times"
      timeout 400 python3 bench/scripts/timing_fidelity.py --iters 20 ${FIDELITY_ONLY:+--only $FIDELITY_ONLY} ${FIDELITY_ARGS:-} \
        --out "$OUT" 2>&1 | tee "$OUT/fidelity.log" \
        | grep -v '^{' ;;
    latency)
      step "kag score --server on level-1 ReLU"
      kag serve > "$OUT/serve.log" 2>&1 & serve_pid=$!
      for _ in $(seq 1 60); do [ -S "/tmp/kag-$(id -u)/eval.sock" ] && break; sleep 1; done
      export KAG_EVAL_SERVER="/tmp/kag-$(id -u)/eval.sock"
      task=examples/kernelbench_sample/level1/19_ReLU.py
      for i in 1 2 3; do
        t0=$(date +%s.%N)
        kag score --task $task --solution examples/relu/cuda --json > "$OUT/latency_$i.json" 2> "$OUT/latency_$i.err"
        python3 -c "print(f'kag score --server, run $i: {$(date +%s.%N) - $t0:.2f} s')"
      done
      python3 -c "import json,sys; d=json.load(open('$OUT/latency_3.json')); print(d['reward'], d['times_ms'], d['durations_s'], d['metadata'].get('calibration'), d['metadata'].get('confinement'))"
      # one more with the phase marks of every process (server, judge, candidate), in time order
      kill "$serve_pid"; wait "$serve_pid" 2>/dev/null; sleep 1
      KAG_TRACE=1 kag serve > "$OUT/serve_trace.log" 2>&1 & serve_pid=$!
      for _ in $(seq 1 60); do [ -S "/tmp/kag-$(id -u)/eval.sock" ] && break; sleep 1; done
      for i in 1 2; do
        t0=$(date +%s.%N)
        KAG_TRACE=1 kag score --task $task --solution examples/relu/cuda --json > "$OUT/latency_trace.json" 2> "$OUT/latency_trace.err"
        python3 -c "print(f'kag score --server (traced), run $i: {$(date +%s.%N) - $t0:.2f} s')"
      done
      python3 bench/scripts/trace_timeline.py "$OUT/serve_trace.log" "$OUT/latency_trace.err" "$OUT/latency_trace.json"
      kill "$serve_pid"; wait "$serve_pid" 2>/dev/null ;;
    timed)
      step "the cases whose verdict depends on the timing, static guards on and off"
      cases=timer_module_table,timer_harness_object,timer_cpp_pybind,skip_python_counter,skip_cpp_counter,skip_after_checks,lazy_output_harness,spot_hooks_python,spot_hooks_cpp,spot_by_call_count,background_thread,first_calls_only,example_relu,example_softmax,example_gemm_divide_sum_scaling,example_diag_matmul,tiny_honest,cublas_matmul
      timeout 200 python3 bench/scripts/adversarial.py --jobs 4 --only $cases 2>&1 | tee "$OUT/timed_on.log" | tail -22 | cut -c1-200
      timeout 200 python3 bench/scripts/adversarial.py --jobs 4 --no-static-guards --only $cases 2>&1 | tee "$OUT/timed_off.log" | tail -22 | cut -c1-200 ;;
    retry)
      step "the static-off misses of the last call, after their fix"
      timeout 120 python3 bench/scripts/adversarial.py --no-timing --no-static-guards \
        --only cublas_forbidden,tf32_flag,background_thread 2>&1 | tee "$OUT/retry.log" | cut -c1-200 ;;
    gputests)
      step "GPU test files"
      timeout 560 python3 -m pytest -q -m "gpu" tests/core/eval/orchestrator/test_evaluate_gpu.py tests/plugins/backends/test_cuda.py \
        2>&1 | tail -15 ;;
  esac
done
