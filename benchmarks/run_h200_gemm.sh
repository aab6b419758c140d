#!/usr/bin/env bash
# Second device call of the core issue: the test suite on the device's Triton and the GEMM drop-in
# comparison with a list small enough that stock's serial compiles fit one command.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-out}; mkdir -p "$OUT"
echo "== tests on this machine's Triton (interpreter)"
(cd /tmp && timeout 150 python3 -m pytest -q -p no:cacheprovider "$OLDPWD/tests" -o addopts="--import-mode=importlib" 2>&1 | tail -6) | tee "$OUT/tests.log"
echo "== GEMM drop-in"
TUNEKIT_LOG=info timeout 420 python3 benchmarks/gemm_dropin.py --configs "${GEMM_CONFIGS:-16}" --compile-timeout 120 --json "$OUT/gemm_dropin.json" 2>&1 | tee "$OUT/gemm_full.log" | grep -v " tunekit\." | tail -25
