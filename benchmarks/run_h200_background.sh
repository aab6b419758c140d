#!/usr/bin/env bash
# One device call (nvidia-h200): background=True on new GEMM shapes (benchmarks/background_gemm.py),
# each shape in a fresh process from an empty Triton cache and store. Expects the wheels of tunekit
# and its missing dependencies in .whl/ (benchmarks/README.md).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
OUT=${OUT:-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
SECONDS_BUDGET=${SECONDS_BUDGET:-20}
for shape in "1024 5120 5120" "16 4096 4096" "3072 3072 3072"; do
    name=$(echo "$shape" | tr ' ' x)
    timeout 150 python3 benchmarks/background_gemm.py --shape $shape --seconds "$SECONDS_BUDGET" \
        --json "$OUT/background-$name.json" > "$OUT/background-$name.log" 2>&1
    echo "== $shape: rc $?"; tail -n 45 "$OUT/background-$name.log"
done
