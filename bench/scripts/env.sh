# Sourced by the GPU scripts of bench/scripts/ (`source bench/scripts/env.sh`), never run on its own.
# It sets up what every one of them assumes, on any Linux machine with this checkout:
#   - the working directory is the repository root (it changes to it), so a script runs from anywhere;
#   - OUT, where the script's logs and tables go: $KAG_BENCH_OUT when set (a relative path is taken
#     from the directory the script was started in), else bench/out/<script name>/ (git ignores
#     bench/out/); created, and exported so the Python scripts it runs write there too;
#   - KAG_KERNELBENCH, the KernelBench folder (levels 1-3) the corpus, the examples and the GPU tests
#     read: as set, else .kb in the repository root;
#   - `kag` on PATH runs this checkout's code (python3 -m kag.cli.main), with its cache in
#     $KAG_CACHE_DIR (default /tmp/kag-cache);
#   - step TITLE: prints a stage's heading with the time.
set -uo pipefail
_kag_bench_name=$(basename "${BASH_SOURCE[1]:-$0}" .sh)
OUT="${KAG_BENCH_OUT:-}"
if [ -n "$OUT" ]; then mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd); fi
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT="${OUT:-$PWD/bench/out/$_kag_bench_name}"
mkdir -p "$OUT"
export OUT
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:${PYTHONPATH:-}"
export KAG_KERNELBENCH="${KAG_KERNELBENCH:-$PWD/.kb}" KAG_CACHE_DIR="${KAG_CACHE_DIR:-/tmp/kag-cache}"
[ -d "$KAG_KERNELBENCH" ] || echo "note: no KernelBench at $KAG_KERNELBENCH (set KAG_KERNELBENCH); stages that read it fail" >&2
_kag_bench_bin="${TMPDIR:-/tmp}/kag-bench-bin"
mkdir -p "$_kag_bench_bin" && printf '#!/bin/sh\nexec python3 -m kag.cli.main "$@"\n' > "$_kag_bench_bin/kag" && chmod +x "$_kag_bench_bin/kag"
export PATH="$_kag_bench_bin:$PATH"
step() { echo; echo "=== $1 ($(date +%T))"; }
echo "output: $OUT"
