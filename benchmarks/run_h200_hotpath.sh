#!/usr/bin/env bash
# Device call: the test suite on the device's Triton, then the hot-path benchmark, with the
# current code (wheels in .whl/, see benchmarks/README.md); logs and JSON under $OUT.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
export TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-out}; mkdir -p "$OUT"
echo "== tests on this machine's Triton (interpreter)"
(cd /tmp && timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider "$OLDPWD/tests" -o addopts="--import-mode=importlib -ra" 2>&1 | tail -8) | tee "$OUT/tests.log"
echo "== hot path"
[ -n "${SKIP_HOT_PATH:-}" ] || timeout 200 python3 benchmarks/hot_path.py --json "$OUT/hot_path.json" 2>&1 | tee "$OUT/hot_path.log"
