#!/usr/bin/env bash
# One device call: live GEMM tuning from a cold cache for the strategies in $STRATEGIES, seeds
# $SEEDS, a $SECONDS budget each (benchmarks/live_gemm.py). Expects the wheels of tunekit and its
# missing dependencies (optuna's included) in .whl/ (benchmarks/README.md); writes under $OUT.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
OUT=${OUT:-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader; nproc
strategies() { for s in $1; do printf -- '--strategy %s ' "$s"; done; }
python3 benchmarks/live_gemm.py $(strategies "${STRATEGIES:-default+transfer default random}") --seeds ${SEEDS:-0 1} \
    --seconds "${SECONDS_BUDGET:-60}" --shape "${SHAPE:-square}" --stock-sample "${STOCK_SAMPLE:-8}" \
    --rounds "${ROUNDS:-15}" --json "$OUT/live_gemm.json" 2>&1 | tee "$OUT/live_gemm.log"
