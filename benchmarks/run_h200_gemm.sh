#!/usr/bin/env bash
# Device call for the core issue: the GEMM drop-in comparison (a list small enough that stock's
# serial compiles fit one command) and the torch.compile check. Expects the wheels of tunekit
# and its missing dependencies in .whl/ (benchmarks/README.md); writes logs and JSON under $OUT.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
export TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-out}; mkdir -p "$OUT"
if [ -n "${RUN_TESTS:-}" ]; then
  echo "== tests on this machine's Triton (interpreter)"
  (cd /tmp && timeout 150 python3 -m pytest -q -p no:cacheprovider "$OLDPWD/tests" -o addopts="--import-mode=importlib" 2>&1 | tail -6) | tee "$OUT/tests.log"
fi
echo "== torch.compile"
timeout 120 python3 benchmarks/torch_compile_check.py 2>&1 | tail -12 | tee "$OUT/torch_compile.log"
echo "== GEMM drop-in"
TUNEKIT_LOG=info timeout 420 python3 benchmarks/gemm_dropin.py --configs "${GEMM_CONFIGS:-16}" --seed "${GEMM_SEED:-0}" --compile-timeout 120 --json "$OUT/gemm_dropin.json" 2>&1 | tee "$OUT/gemm_full.log" | grep -v " tunekit\." | tail -25
