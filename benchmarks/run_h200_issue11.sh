#!/usr/bin/env bash
# Device call for issue 11's figures, in one command of under 10 minutes on the H200: first calls of
# tunekit and stock (vector add 2 configs, GEMM 8 configs; 3 alternated rounds each, fresh processes,
# cold caches), tunekit over the GEMM's whole Space with a 60 s budget (1 run), the hot path
# (benchmarks/hotpath_store.py), and the GEMM 24-config list (1 round: stock compiles it serially in
# about 140 s). Expects the wheels in .whl/ (benchmarks/README.md); writes under $OUT.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
export TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-out}; mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader; nproc
  ls /dev | grep -E '^(nvidia|kfd)' | tr '\n' ' '; echo
  python3 -c "import torch, tunekit.service as s; print('zygote fork at decoration refused because:', s.fork_refusal())"
} 2>&1 | tee "$OUT/machine.log"
timeout 240 python3 benchmarks/first_call.py --kinds vadd gemm8 --runs 3 --space-budget-runs 1 --space-shapes square \
    --json "$OUT/first_call.json" 2>&1 | tee "$OUT/first_call.log"
timeout 80 python3 benchmarks/hotpath_store.py 2>&1 | tee "$OUT/hotpath.log"
timeout 200 python3 benchmarks/first_call.py --kinds gemm24 --runs 1 --space-budget-runs 0 \
    --json "$OUT/first_call_gemm24.json" 2>&1 | tee "$OUT/first_call_gemm24.log"
