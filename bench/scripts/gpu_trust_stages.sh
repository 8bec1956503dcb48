#!/usr/bin/env bash
# Device calls for issues 12-13 (the measurement and the isolation of the trusted evaluator).
# Stages, in one call or several: smoke (doctor + 6 corpus cases), corpus (every CUDA case with the
# static guards on; timed calls where a case needs them), nostatic (every CUDA case with every
# static guard off), fidelity (kag's speed-up vs CUPTI kernel times), latency (kag score through
# kag serve on level-1 ReLU), gputests (the GPU test files). Logs and tables go to $OUT.
#   bash bench/device_issue12.sh smoke fidelity ...
#   FIDELITY_ARGS=--reference-calibration bash bench/device_issue12.sh fidelity   (the opt-in path calibration)
source bench/device_env.sh
for stage in "$@"; do
  case "$stage" in
    smoke)
      step "kag doctor"
      kag doctor
      step "smoke: six corpus cases on the GPU"
      timeout 300 python3 bench/adversarial.py --jobs 2 \
        --only example_relu,timer_harness_object,skip_cpp_counter,judge_memory_python,escape_cpp_fork,spot_hooks_cpp \
        2>&1 | tee "$OUT/smoke.log" | cut -c1-220 ;;
    corpus)
      step "adversarial corpus (CUDA), static guards on"
      timeout 330 python3 bench/adversarial.py --jobs 4 --no-timing 2>&1 | tee "$OUT/corpus.log" | cut -c1-200
      mkdir -p "$OUT/static_on" && mv "$OUT"/adversarial.* "$OUT/static_on/" ;;
    nostatic)
      step "adversarial corpus (CUDA), every static guard off"
      timeout 250 python3 bench/adversarial.py --jobs 4 --no-timing --no-static-guards --static-relevant 2>&1 \
        | tee "$OUT/nostatic.log" | cut -c1-200 ;;
    fidelity)
      step "timing fidelity vs CUPTI kernel times"
      timeout 400 python3 bench/fidelity.py --iters 20 ${FIDELITY_ONLY:+--only $FIDELITY_ONLY} ${FIDELITY_ARGS:-} 2>&1 | tee "$OUT/fidelity.log" \
        | grep -v '^{' ;;
    latency)
      step "kag score --server on level-1 ReLU"
      (kag serve > "$OUT/serve.log" 2>&1 &)
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
      pkill -f "kag.cli.main serve"; sleep 1
      (KAG_TRACE=1 kag serve > "$OUT/serve_trace.log" 2>&1 &)
      for _ in $(seq 1 60); do [ -S "/tmp/kag-$(id -u)/eval.sock" ] && break; sleep 1; done
      for i in 1 2; do
        t0=$(date +%s.%N)
        KAG_TRACE=1 kag score --task $task --solution examples/relu/cuda --json > "$OUT/latency_trace.json" 2> "$OUT/latency_trace.err"
        python3 -c "print(f'kag score --server (traced), run $i: {$(date +%s.%N) - $t0:.2f} s')"
      done
      python3 bench/trace_timeline.py "$OUT/serve_trace.log" "$OUT/latency_trace.err" "$OUT/latency_trace.json" ;;
    timed)
      step "the cases whose verdict depends on the timing, static guards on and off"
      cases=timer_module_table,timer_harness_object,timer_cpp_pybind,skip_python_counter,skip_cpp_counter,skip_after_checks,lazy_output_harness,spot_hooks_python,spot_hooks_cpp,spot_by_call_count,background_thread,first_calls_only,example_relu,example_softmax,example_gemm_divide_sum_scaling,example_diag_matmul,tiny_honest,cublas_matmul
      timeout 200 python3 bench/adversarial.py --jobs 4 --only $cases 2>&1 | tee "$OUT/timed_on.log" | tail -22 | cut -c1-200
      timeout 200 python3 bench/adversarial.py --jobs 4 --no-static-guards --only $cases 2>&1 | tee "$OUT/timed_off.log" | tail -22 | cut -c1-200 ;;
    retry)
      step "the static-off misses of the last call, after their fix"
      timeout 120 python3 bench/adversarial.py --no-timing --no-static-guards \
        --only cublas_forbidden,tf32_flag,background_thread 2>&1 | tee "$OUT/retry.log" | cut -c1-200 ;;
    gputests)
      step "GPU test files"
      timeout 560 python3 -m pytest -q -m "gpu" tests/core/eval/test_evaluate_gpu.py tests/plugins/backends/test_cuda.py \
        2>&1 | tail -15 ;;
  esac
done
