#!/usr/bin/env bash
# One device call timing a strategy's CPU time per proposed config on the H200 host's core, this
# tunekit (.whl/) against another (a wheel in .whl-before/, built at an earlier commit), side by
# side (experiments/strategy_time.py). Carry .whl, .whl-before and .spaces. Writes
# $OUT/strategy-time.json and .log (and listed-steps.json, .log with LISTED_SEEDS).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../benchmarks/device_env.sh"
export TUNEKIT_SHARED_SPACES=$PWD/.spaces
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=${OUT:-out}; mkdir -p "$OUT"
if [[ -z "${SKIP_INSTALL:-}" ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/before_site \
        .whl-before/tunekit-*.whl || exit 1
fi
this=$(cat .whl/COMMIT); against=$(cat .whl-before/COMMIT)
timeout "${LIMIT_S:-300}" python3 experiments/strategy_time.py --seeds "${SEEDS:-5}" --strategy "${STRATEGY:-default}" \
    --against /tmp/before_site --this-name "$this" --against-name "$against" --out "$OUT/strategy-time.json" \
    2>&1 | tee "$OUT/strategy-time.log"
# LISTED_SEEDS=N: also check that experiments/listed_steps.py here proposes what the other tunekit's default does
if [[ -n "${LISTED_SEEDS:-}" ]]; then
    timeout "${LISTED_LIMIT_S:-120}" python3 experiments/strategy_time.py --seeds "$LISTED_SEEDS" \
        --corpus experiments/corpus/v2.json --space "${LISTED_SPACE:-h200/gemv-n4k_k4k}" \
        --strategy listed_steps:ListedStepsDefault --against-strategy default --against /tmp/before_site \
        --this-name "$this" --against-name "$against" --out "$OUT/listed-steps.json" 2>&1 | tee "$OUT/listed-steps.log"
fi
