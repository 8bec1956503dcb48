#!/usr/bin/env bash
# Fixed file (read-only). Compile kernels/ and the fixed binding into the `cuda_extension` module
# with kag's trusted build: each file is compiled alone and cached, so only edited files rebuild.
# Prints ok/FAILED, compiler errors as file:line: message, seconds, files compiled vs cached.
# Usage: bash utils/compile.sh        (the backend comes from .kag/workspace.json)
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
if [ -n "${KAG_BRIDGE:-}" ]; then  # inside a sandbox: the trusted evaluator builds, outside
  exec "${KAG_PYTHON:-python3}" utils/verification.py --kag-bridge-action compile "$@"
fi
exec "${KAG_PYTHON:-python3}" -m kag.cli.main build . "$@"
