#!/usr/bin/env bash
# Device call (nvidia-h200-x2, or nvidia-h200 for the 1-GPU pass alone): benchmarks/tune_gpus.py.
# Expects in .whl/ the wheels of benchmarks/README.md and tunekit's, built from the commit measured.
# EVALS and SECONDS set the budget per key (default 40 evaluations, 60 s).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
repo="$PWD"
cd /tmp && PYTHONPATH=/tmp/site python3 "$repo/benchmarks/tune_gpus.py" --out "$OUT" \
    --evals "${EVALS:-40}" --seconds "${SECONDS_PER_KEY:-60}" ${MANIFEST:+--manifest "$MANIFEST"} 2>&1 | tail -40
