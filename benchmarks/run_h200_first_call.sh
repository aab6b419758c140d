#!/usr/bin/env bash
# Device call for issue 11: the first call of a tuned kernel (tuning included), tunekit vs stock
# triton.autotune, each in a fresh process with a cold Triton cache, then tunekit over the GEMM's
# whole Space with a 60 s budget (benchmarks/first_call.py). Expects the wheels of tunekit and its
# missing dependencies in .whl/ (benchmarks/README.md); writes first_call.json and .log under $OUT.
#
# Wall time, estimated for the H200 (stock compiles serially, ~0.5 s a config and some far longer;
# every process also spends a few seconds starting torch and CUDA): one round of stock + tk takes
# ~20 s for vadd, ~35 s for gemm8, ~50 s for gemm24, ~80 s for gemm48; one space-budget run ~75 s.
# The defaults (KINDS="vadd gemm8", RUNS=5, SPACE_RUNS=2 runs of SPACE_SHAPES=square) come to
# ~7.5 min; TIMEOUT ends the benchmark at 8.5 min (first_call.json keeps every process finished by
# then). The larger lists fit a second call: KINDS="gemm24 gemm48" RUNS=3 SPACE_RUNS=0; the other
# shapes a third: KINDS= SPACE_RUNS=1 SPACE_SHAPES="square large_k small_k decode".
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
export TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader; nproc
timeout "${TIMEOUT:-510}" python3 benchmarks/first_call.py --kinds ${KINDS-vadd gemm8} --runs "${RUNS:-5}" \
    --space-budget-runs "${SPACE_RUNS:-2}" --space-shapes ${SPACE_SHAPES:-square} \
    --json "$OUT/first_call.json" 2>&1 | tee "$OUT/first_call.log"
