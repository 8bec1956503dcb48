# Sourced by the bench/device_*.sh scripts: the environment of a device call. Run from the repo
# root with KernelBench levels 1-3 carried in .kb; `kag` runs from this checkout; logs go to $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:${PYTHONPATH:-}" KAG_KERNELBENCH="$PWD/.kb" KAG_CACHE_DIR=/tmp/kag-cache
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
mkdir -p /tmp/bin && printf '#!/bin/sh\nexec python3 -m kag.cli.main "$@"\n' > /tmp/bin/kag && chmod +x /tmp/bin/kag
export PATH="/tmp/bin:$PATH"
step() { echo; echo "=== $1 ($(date +%T))"; }
