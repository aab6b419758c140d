#!/usr/bin/env bash
# Device calls for issue 11's closing figures (two calls of under 10 minutes on the H200).
#   PART=1: first calls of stock and tunekit, alternated, fresh processes, cold caches: vector add
#           (2 configs, 7 rounds) and GEMM 8 configs (5 rounds); tunekit over the GEMM's whole Space
#           with a 60 s budget (square shape, 1 run: cut off by the time limit in the run that measured
#           the figures); the hot path; GEMM 24 configs (1 round).
#   PART=2: GEMM 48 configs, 1 round (stock compiles them serially: minutes); the 60 s whole-Space run
#           (PART=1's was cut off by its time limit).
# Expects the wheels in .whl/ (benchmarks/README.md); writes under $OUT.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
OUT=${OUT:-out}; mkdir -p "$OUT"
cp -r benchmarks /tmp/benchmarks && cd /tmp  # run outside the source tree: the wheel's tunekit
{
  nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader; nproc
  python3 -c "import tunekit, tunekit.service as s; print(tunekit.__file__); print('zygote fork refused because:', s.fork_refusal())"
} 2>&1 | tee "$OUT/machine.log"
if [ "${PART:-1}" = 1 ]; then
  timeout 230 python3 benchmarks/first_call.py --kinds vadd --runs 7 --json "$OUT/first_call_vadd.json" 2>&1 | tee "$OUT/first_call_vadd.log"
  timeout 170 python3 benchmarks/first_call.py --kinds gemm8 --runs 5 --space-budget-runs 1 --space-shapes square \
      --json "$OUT/first_call_gemm8.json" 2>&1 | tee "$OUT/first_call_gemm8.log"
  timeout 60 python3 benchmarks/hotpath_store.py 2>&1 | tee "$OUT/hotpath.log"
  timeout 200 python3 benchmarks/first_call.py --kinds gemm24 --runs 1 --json "$OUT/first_call_gemm24.json" 2>&1 \
      | tee "$OUT/first_call_gemm24.log"
else
  timeout 420 python3 benchmarks/first_call.py --kinds gemm48 --runs 1 --timeout 400 --json "$OUT/first_call_gemm48.json" \
      2>&1 | tee "$OUT/first_call_gemm48.log"
  timeout 110 python3 benchmarks/first_call.py --kinds --space-budget-runs 1 --space-shapes square \
      --json "$OUT/space_budget.json" 2>&1 | tee "$OUT/space_budget.log"
fi
