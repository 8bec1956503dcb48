#!/usr/bin/env bash
# The judge on a GPU: a clock that sees small kernels (fidelity, steadiness), the attacks on it, the walls.
# Needs: one NVIDIA GPU, CUDA torch, nvcc, ncu's CUPTI (torch.profiler); KernelBench levels 1-3 in $KAG_KERNELBENCH
# (default .kb). Writes: each stage's log and tables (fidelity.md/.json, steadiness.md/.json, the corpus tables)
# to $KAG_BENCH_OUT (default bench/out/gpu_judge_stages/).
#   bash bench/scripts/gpu_judge_stages.sh fidelity steady
# Stages, in one call or several:
#   fidelity   kag's speed-up vs eager against the CUPTI kernel-time ratio (bench/scripts/timing_fidelity.py)
#   steady     diag_matmul and level2/14 scored 5 times each (STEADY_ONLY: those), torch.compile too (STEADY_COMPILE=0: not)
#   steadyx    diag_matmul scored 5 times with eager timed afresh in each, beside the CUPTI ratio in 5 fresh
#              processes (where the spread between evaluations comes from)
#   latency    kag score --server on level-1 ReLU (a warm judge, cached baselines), twice
#   gputests   the GPU test files
#   pausetests the GPU test that the pause after a window says nothing of whether one of its calls was compared
#   recordertests  kag's CUPTI kernel recorder's tests (tests/core/eval/candidate/test_kernel_records.py)
#   opcounter  a C++ operator counter on RecordFunction against torch.profiler's CPU session: a call's CPU
#              (bench/scripts/op_counter_probe.py, diag_matmul and a tiny call)
#   recorderab diag_matmul scored with kag's kernel recorder and with torch.profiler's (KAG_KERNEL_RECORDER), alternated
#   observerab diag_matmul scored with kag's operator counter (and kernel recorder) and with torch.profiler's session
#              (KAG_OBSERVER=counter|profiler), alternated, each with its own cache (its baselines timed the same way)
#   trusttests the confinement's tests (a candidate's /dev/shm and exec environment) with CUDA
#   pathcost   what a call's CPU path costs, piece by piece (bench/scripts/path_cost.py)
#   callcost   the same for a real solution (CALL_TASK, default diag_matmul), without and with kag's filter
#              (bench/scripts/call_cost.py)
#   leanprobe  a kernel recorder on CUPTI alone against torch.profiler's session: a call's CPU cost, every kernel
#              attributed to its call? (bench/scripts/gpu_probe_lean_recorder.py)
#   nostatic   every CUDA case of the adversarial corpus with every static guard off, timed (SHARD=K/N, ADV_JOBS=J at once)
#   static     the same with the static guards on (ONLY=a,b: those cases only, either stage)
#   wallprobe  why the fatbin wall held in a bare process and not in the candidate; a thread's launches
#              as the observer records them (bench/scripts/gpu_probe_wall_threads.py)
#   steady4    the same on every GPU of the host at once, one process per GPU (its own cache), N_GPUS=4
#   threadprobe  what the observer records of kernels launched by other threads (gpu_probe_thread_launches.py)
#   budget     the GPU test of both sides' windows sized from one budget (level1/47, 8.6 GB a call)
#   mremapprobe  the wall undone by growing a file mapping, with and without the candidate's filter
#              (bench/scripts/gpu_probe_wall_mremap.py)
#   scanprobe  what the fatbin wall's library scan finds over every folder a candidate may read
#              (bench/scripts/gpu_probe_library_scan.py)
#   nvrtcprobe PyTorch's run-time-compiled ops and cuDNN convolutions with NVRTC closed or kept, as each
#              task's candidate has it (bench/scripts/gpu_probe_nvrtc.py)
#   nvrtctests the NVRTC wall's test file, its slow build test included
#   rebuild    a one-kernel edit (cuda and nvrtc backends) and a binding edit (precompiled torch header on
#              and off), through kag's own build (bench/scripts/nvrtc_rebuild.py)
#   compileprobe  why torch.compile's baseline of diag_matmul does not settle (gpu_probe_compile_spread.py)
#   smallpath  why eager reads slower than the candidate for ~20-50 us kernels: windows as the judge runs
#              them, bare, under a CPU-only profiler and under kag's observer (gpu_probe_small_path.py)
#   dma        the fatbin wall against a GPU copy into its pages (cudaHostRegister read-only, then a
#              device-to-host copy, a mapped alias and a kernel write; bench/scripts/wall_attack/gpu)
#   shortend   a short window's end out of its time: the window protocol's tests and the two corpus cases that
#              pad short windows' ends (tests/adversarial/test_gpu_cases.py), static guards off
#   oldtree    the same two cases (OLD_ONLY: others) on the code before (a tree in $KAG_OLD_TREE, default .old: `git archive <commit>` plus
#              the cases), to show what the attack bought there
#   fidab      fidelity (FIDELITY_ONLY) on this tree and on the code in $KAG_OLD_TREE, alternated: what a change did
#              to kag's clock against CUPTI on one machine
#   nullcap    a GPU null base bounded by the runner's (13 GB a call: windows of one call), honest and padded
#   loadab     diag_matmul with the timed child raised (KAG_TIMED_NICE=-5) and not (0), alternated LOAD_ROUNDS times,
#              alone and beside LOAD_HOGS spinning processes (default 6; one per core made evaluations take >200 s)
# Logs and tables go to $OUT.   bash bench/scripts/gpu_judge_stages.sh fidelity latency
source "$(dirname "$0")/env.sh"
OLD_TREE="${KAG_OLD_TREE:-$PWD/.old}"
# alternate NAME VARIABLE MODE...: diag_matmul (STEADY_ONLY) scored once per mode, VARIABLE=MODE, AB_ROUNDS rounds,
# each mode with its own cache (its baselines timed the same way as its candidate)
alternate() {
  local name=$1 var=$2
  shift 2
  for round in $(seq 1 "${AB_ROUNDS:-3}"); do
    for mode in "$@"; do
      env "$var=$mode" KAG_CACHE_DIR="/tmp/kag-cache-$name-$mode" timeout 150 python3 bench/scripts/timing_fidelity.py \
        --only "${STEADY_ONLY:-diag_matmul}" --repeat 1 --out "$OUT/$name/$mode-$round" 2>&1 \
        | grep '^{' | sed "s/^/$mode round $round: /" | tee -a "$OUT/$name.log" | cut -c1-260
    done
  done
}
for stage in "$@"; do
  case "$stage" in
    fidelity)
      step "timing fidelity vs CUPTI kernel times"
      timeout "${FID_TIMEOUT:-480}" python3 bench/scripts/timing_fidelity.py ${FIDELITY_ONLY:+--only $FIDELITY_ONLY} \
        --out "$OUT/fid" 2>&1 | tee "$OUT/fidelity.log" | cut -c1-300 ;;
    steady)
      step "steadiness: diag_matmul and gemm_divide_sum_scaling scored 5 times"
      timeout "${STEADY_TIMEOUT:-300}" python3 bench/scripts/timing_fidelity.py --only "${STEADY_ONLY:-diag_matmul,gemm_divide_sum_scaling}" \
        --repeat 5 $([ "${STEADY_COMPILE:-1}" = 1 ] && echo --compile) --out "$OUT/steady" 2>&1 | tee "$OUT/steady.log" | cut -c1-300 ;;
    opcounter)
      step "kag's operator counter against torch.profiler's CPU session, a call's CPU"
      for task in "${CALL_TASK:-diag_matmul}" tiny; do
        timeout 240 python3 bench/scripts/op_counter_probe.py --task "$task" --backend cuda --out "$OUT" 2>&1 \
          | grep -v USDT | tee -a "$OUT/opcounter.log" | cut -c1-300
      done ;;
    recorderab)
      step "diag_matmul with kag's kernel recorder and with torch.profiler's, alternated (AB_ROUNDS, default 3)"
      alternate recorderab KAG_KERNEL_RECORDER kag profiler ;;
    observerab)
      step "diag_matmul with kag's operator counter and with torch.profiler's session, alternated (AB_ROUNDS, default 3)"
      alternate observerab KAG_OBSERVER counter profiler ;;
    steadyx)
      step "steadiness: diag_matmul 5 times, baselines afresh, and the independent clock in 5 processes"
      timeout "${STEADY_TIMEOUT:-300}" python3 bench/scripts/timing_fidelity.py --only "${STEADY_ONLY:-diag_matmul}" \
        --repeat 5 --fresh-baselines --reference-repeat 5 --out "$OUT/steadyx" 2>&1 | tee "$OUT/steadyx.log" | cut -c1-300 ;;
    latency)
      step "kag score --server on level-1 ReLU"
      timeout 240 python3 - <<'EOF' 2>&1 | tee "$OUT/latency.log" | cut -c1-400
import json, os, sys
from pathlib import Path
sys.path.insert(0, "bench/scripts")
from evaluator import score_through_server
repo = Path.cwd()
env = dict(os.environ)
rows = score_through_server(repo, env, [("relu", repo / "examples/kernelbench_sample/level1/19_ReLU.py",
                                          repo / "examples/relu/cuda")])
Path(os.environ["OUT"], "latency.json").write_text(json.dumps(rows, indent=1))
EOF
      ;;
    callcost)
      step "a real solution's call, piece by piece, without and with the candidate's filter"
      for flag in "" --seccomp; do
        timeout 240 python3 bench/scripts/call_cost.py --task "${CALL_TASK:-diag_matmul}" $flag --out "$OUT" 2>&1 \
          | grep -v USDT | tee -a "$OUT/callcost.log" | cut -c1-300
      done ;;
    leanprobe)
      step "a lean kernel recorder's cost a call against torch.profiler's session"
      timeout 240 python3 bench/scripts/gpu_probe_lean_recorder.py --task "${CALL_TASK:-diag_matmul}" --out "$OUT" 2>&1 \
        | grep -v USDT | tee "$OUT/leanprobe.log" | cut -c1-300 ;;
    steady4)
      step "steadiness with every GPU busy: one scorer per GPU"
      for i in $(seq 0 $(( ${N_GPUS:-4} - 1 ))); do
        CUDA_VISIBLE_DEVICES=$i KAG_CACHE_DIR=/tmp/kag-cache-$i timeout "${STEADY_TIMEOUT:-300}" python3 \
          bench/scripts/timing_fidelity.py --only diag_matmul,gemm_divide_sum_scaling --repeat 5 --compile \
          --out "$OUT/steady4/gpu$i" > "/tmp/steady4_gpu$i.log" 2>&1 &
      done
      wait
      tail -n 3 /tmp/steady4_gpu*.log; cat "$OUT"/steady4/gpu*/steadiness.md ;;
    pathcost)
      step "a call's CPU path, piece by piece"
      timeout 120 python3 bench/scripts/path_cost.py --out "$OUT" 2>&1 | tee "$OUT/pathcost.log" ;;
    gputests)
      step "GPU test files"
      timeout "${GPUTESTS_TIMEOUT:-480}" python3 -m pytest -q -x -p no:cacheprovider tests/core/eval/orchestrator/test_evaluate_gpu.py \
        tests/plugins/backends/test_cuda.py tests/core/eval/judge/test_priority.py tests/core/eval/judge/test_judge_timing.py tests/core/eval/judge/test_windows.py \
        tests/core/eval/candidate/test_kernel_records.py tests/core/eval/candidate/test_op_counter.py 2>&1 \
        | tee "$OUT/gputests.log" | tail -15 ;;
    pausetests)
      step "a pause says nothing of a compared window: the GPU test of tests/core/eval/judge/test_pauses.py"
      timeout "${PAUSETESTS_TIMEOUT:-300}" python3 -m pytest -q -s -p no:cacheprovider tests/core/eval/judge/test_pauses.py \
        -k gpu 2>&1 | tee "$OUT/pausetests.log" | tail -8 ;;
    recordertests)
      step "kag's CUPTI kernel recorder and operator counter"
      timeout 240 python3 -m pytest -q -p no:cacheprovider tests/core/eval/candidate/test_kernel_records.py \
        tests/core/eval/candidate/test_op_counter.py 2>&1 \
        | tee "$OUT/recordertests.log" | tail -30 ;;
    trusttests)
      step "the confinement's tests with CUDA (the judge's own /dev/shm and IPC, the erased exec environment)"
      timeout 240 python3 -m pytest -q -p no:cacheprovider tests/core/trust/test_isolation.py \
        tests/core/eval/orchestrator/test_evaluate.py -k "shm or ipc or environment or evaluations_folder or isolation" 2>&1 \
        | tee "$OUT/trusttests.log" | tail -15 ;;
    nostatic)
      step "adversarial corpus (CUDA), every static guard off, timed, shard ${SHARD:-1/1}"
      timeout "${ADV_TIMEOUT:-540}" python3 bench/scripts/adversarial.py --jobs "${ADV_JOBS:-4}" --no-static-guards --shard "${SHARD:-1/1}" ${ONLY:+--only $ONLY} 2>&1 \
        | tee "$OUT/nostatic.log" | cut -c1-200
      mkdir -p "$OUT/nostatic" && mv "$OUT"/adversarial* "$OUT/nostatic/" 2>/dev/null ;;
    static)
      step "adversarial corpus (CUDA), static guards on, timed, shard ${SHARD:-1/1}"
      timeout "${ADV_TIMEOUT:-540}" python3 bench/scripts/adversarial.py --jobs "${ADV_JOBS:-4}" --shard "${SHARD:-1/1}" ${ONLY:+--only $ONLY} 2>&1 \
        | tee "$OUT/static.log" | cut -c1-200
      mkdir -p "$OUT/static" && mv "$OUT"/adversarial* "$OUT/static/" 2>/dev/null ;;
    wallprobe)
      step "the fatbin wall, step by step; a thread's kernel launches"
      timeout "${PROBE_TIMEOUT:-400}" python3 bench/scripts/gpu_probe_wall_threads.py 2>&1 | tee "$OUT/wallprobe.log" | cut -c1-600 ;;
    threadprobe)
      step "kernel launches by thread, as the observer records them"
      timeout 240 python3 bench/scripts/gpu_probe_thread_launches.py 2>&1 | tee "$OUT/threadprobe.log" | cut -c1-900 ;;
    budget)
      step "both sides' windows from one budget (GPU test)"
      timeout 240 python3 -m pytest -q -x -s -p no:cacheprovider tests/core/eval/orchestrator/test_evaluate_gpu.py \
        -k same_length 2>&1 | tee "$OUT/budget.log" | tail -8 ;;
    mremapprobe)
      step "the fatbin wall against mremap"
      timeout 300 python3 bench/scripts/gpu_probe_wall_mremap.py 2>&1 | tee "$OUT/mremapprobe.log" | cut -c1-400 ;;
    scanprobe)
      step "the fatbin wall's library scan"
      timeout 240 python3 bench/scripts/gpu_probe_library_scan.py 2>&1 | tee "$OUT/scanprobe.log" | cut -c1-300 ;;
    nvrtcprobe)
      step "NVRTC closed, kept, and what runs"
      timeout 300 python3 bench/scripts/gpu_probe_nvrtc.py 2>&1 | tee "$OUT/nvrtcprobe.log" | cut -c1-300 ;;
    nvrtctests)
      step "the NVRTC wall's tests"
      timeout 200 python3 -m pytest -q -p no:cacheprovider tests/core/trust/test_nvrtc_wall.py 2>&1 \
        | tee "$OUT/nvrtctests.log" | tail -8 ;;
    rebuild)
      step "rebuild after a one-kernel edit, and after a binding edit with the torch header precompiled or not"
      timeout 240 python3 bench/scripts/nvrtc_rebuild.py --edits 3 2>&1 | tee "$OUT/rebuild.log"
      timeout 300 python3 bench/scripts/nvrtc_rebuild.py --edits 3 --binding 2>&1 | tee -a "$OUT/rebuild.log" ;;
    compileprobe)
      step "torch.compile's spread in one process: bare, under the profiler, with ranges"
      timeout 300 python3 bench/scripts/gpu_probe_compile_spread.py --out "$OUT" 2>&1 | tee "$OUT/compileprobe.log" | cut -c1-400 ;;
    shortend)
      step "a short window's end, untimed: protocol tests and the padded-end cases"
      timeout "${SHORT_TIMEOUT:-300}" python3 -m pytest -q -x -s -p no:cacheprovider tests/core/eval/judge/test_windows.py \
        tests/adversarial/test_gpu_cases.py 2>&1 | tee "$OUT/shortend.log" | tail -15 ;;
    oldtree)
      step "the padded-end cases on the code before ($OLD_TREE)"
      mkdir -p "$OUT/oldtree" && (cd "$OLD_TREE" && export PYTHONPATH="$PWD" OUT="$OUT/oldtree" KAG_CACHE_DIR=/tmp/kag-cache-old && timeout "${OLD_TIMEOUT:-240}" python3 bench/adversarial.py --jobs 2 \
        --no-static-guards --only "${OLD_ONLY:-pad_short_windows_python,pad_short_windows_kernel}" 2>&1 \
        | tee "$OUT/oldtree.log" | cut -c1-300) ;;
    fidab)
      step "fidelity vs CUPTI on this tree and on the code before (\$OLD_TREE), alternated (AB_ROUNDS, default 1)"
      nvidia-smi -q -d CLOCK,POWER,PERFORMANCE > "$OUT/fidab_clocks_before.txt" 2>&1
      for round in $(seq 1 "${AB_ROUNDS:-1}"); do
        for tree in new old; do
          dir="$PWD"; [ "$tree" = old ] && dir="$OLD_TREE"
          (cd "$dir" && PYTHONPATH="$dir" KAG_CACHE_DIR="/tmp/kag-cache-fidab-$tree" timeout "${FID_TIMEOUT:-240}" \
            python3 bench/scripts/timing_fidelity.py ${FIDELITY_ONLY:+--only $FIDELITY_ONLY} --out "$OUT/fidab/$tree-$round" 2>&1 \
            | sed "s/^/$tree round $round: /" | tee -a "$OUT/fidab.log" | cut -c1-300)
        done
      done
      nvidia-smi -q -d CLOCK,POWER,PERFORMANCE > "$OUT/fidab_clocks_after.txt" 2>&1 ;;
    nullcap)
      step "a GPU null base bounded by the runner's (13 GB a call)"
      timeout "${NULLCAP_TIMEOUT:-400}" python3 -m pytest -q -s -p no:cacheprovider tests/core/eval/orchestrator/test_evaluate_gpu.py \
        -k null_base 2>&1 | tee "$OUT/nullcap.log" | tail -12 ;;
    smallpath)
      step "a small kernel's window: eager and candidate, bare and observed"
      timeout "${SMALL_TIMEOUT:-300}" python3 bench/scripts/gpu_probe_small_path.py ${SMALL_ARGS:-} --out "$OUT" 2>&1 \
        | tee "$OUT/smallpath.log" | cut -c1-400 ;;
    dma)
      step "the fatbin wall against GPU copies (control, covered unsealed, covered sealed; read-only, mapped)"
      for kind in ctl none sealed; do for fl in 8 10 0 2; do
        timeout 60 python3 bench/scripts/wall_attack/gpu/r18_gpu_dma.py $kind $fl 2>&1 | tail -3
      done; done | tee "$OUT/dma.log" ;;
    loadab)
      step "diag_matmul, the timed child raised (KAG_TIMED_NICE=-5) and not (0), alternated: alone, then beside LOAD_HOGS spinners"
      export KAG_CACHE_DIR=/tmp/kag-cache-load
      echo "sched_autogroup_enabled=$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo absent)" | tee "$OUT/loadab_host.txt"
      ab() { for n in 0 ${LOAD_NICE:--5}; do KAG_TIMED_NICE=$n timeout "${LOAD_RUN_S:-110}" python3 bench/scripts/timing_fidelity.py \
        --only diag_matmul --out "$OUT/loadab/$1-nice$n" 2>&1 | grep '^| diag' | sed "s/^/$1 nice=$n /"; done; }
      for round in $(seq "${LOAD_ROUNDS:-2}"); do ab "alone$round"; done 2>&1 | tee "$OUT/loadab.log"
      hogs=(); for _ in $(seq "${LOAD_HOGS:-6}"); do python3 -c 'while True: pass' & hogs+=($!); done
      for round in $(seq "${LOAD_ROUNDS:-2}"); do ab "hogs${LOAD_HOGS:-6}-$round"; done 2>&1 | tee -a "$OUT/loadab.log"
      kill "${hogs[@]}"; wait "${hogs[@]}" 2>/dev/null ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
