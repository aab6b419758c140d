#!/usr/bin/env bash
# Device call: where tunekit's first call of the 2-config vector add spends its time (issue 11).
# Profiles one tunekit and one stock first call (cProfile of the calling process, TUNEKIT_LOG=debug
# timeline of the benchmark worker), then alternates stock and the tunekit variants that each leave
# one part out (check=False, finalists=1), fresh processes and cold caches; then GEMM 8 configs
# profiled once, and the hot path. Expects the wheels in .whl/ (benchmarks/README.md); writes under $OUT.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
OUT=${OUT:-out}; mkdir -p "$OUT"
cd /tmp && cp -r "$OLDPWD/benchmarks" /tmp/benchmarks && cd /tmp  # run outside the source tree: the wheel's tunekit
{
  nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader; nproc
  python3 -c "import tunekit, tunekit.service as s; print(tunekit.__file__); print('zygote fork refused because:', s.fork_refusal())"
} 2>&1 | tee "$OUT/machine.log"
for v in tk stock; do
  TUNEKIT_LOG=debug timeout 60 python3 benchmarks/first_call.py --one vadd:$v --profile "$OUT/vadd_$v.prof" \
      > "$OUT/profile_vadd_$v.log" 2>&1
done
TUNEKIT_LOG=debug timeout 60 python3 benchmarks/first_call.py --one gemm8:tk --profile "$OUT/gemm8_tk.prof" \
    > "$OUT/profile_gemm8_tk.log" 2>&1
timeout 200 python3 benchmarks/first_call.py --kinds vadd --runs ${RUNS:-3} \
    --variants stock tk tk_nocheck tk_fin1 --json "$OUT/anatomy.json" 2>&1 | tee "$OUT/anatomy.log"
timeout 80 python3 benchmarks/hotpath_store.py 2>&1 | tee "$OUT/hotpath.log"
