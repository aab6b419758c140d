#!/usr/bin/env bash
# Device call (issue 32): the direct launch's tests on the device's Triton, then
# benchmarks/direct_launch.py (guard matrix, CUDA graph, torch.compile, hot path, GEMM launch),
# with the current code (wheels in .whl/, see benchmarks/README.md); logs and JSON under $OUT.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
export TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-out}; mkdir -p "$OUT"
cat .whl/COMMIT > "$OUT/commit.txt" 2>/dev/null
echo "== tests on this machine's Triton"
(cd /tmp && timeout ${TEST_TIMEOUT:-150} python3 -m pytest -q -p no:cacheprovider "$OLDPWD/tests/test_direct.py" \
    -o addopts="--import-mode=importlib -ra" 2>&1 | tail -5) | tee "$OUT/tests.log"
echo "== direct launch"
timeout ${BENCH_TIMEOUT:-400} python3 benchmarks/direct_launch.py 2>&1 | tee "$OUT/direct_launch.log"
echo "== anatomy"
timeout 120 python3 benchmarks/direct_launch_anatomy.py 2>&1 | tee "$OUT/anatomy.log"
