#!/usr/bin/env bash
# One device call for the core issue: the test suite on the device's Triton (3.6), the hot path,
# and the GEMM drop-in comparison. Expects the wheels of tunekit and its missing dependencies
# in .whl/ (see benchmarks/README.md); writes logs and JSON under $OUT.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
export TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-out}; mkdir -p "$OUT"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
echo "== tests on this machine's Triton (interpreter)"
(cd /tmp && python3 -m pytest -q -p no:cacheprovider "$OLDPWD/tests" -o addopts="--import-mode=importlib" 2>&1 | tail -15) | tee "$OUT/tests.log"
echo "== hot path"
python3 benchmarks/hot_path.py --json "$OUT/hot_path.json" 2>&1 | tee "$OUT/hot_path.log"
echo "== GEMM drop-in"
python3 benchmarks/gemm_dropin.py --configs "${GEMM_CONFIGS:-64}" --json "$OUT/gemm_dropin.json" 2>&1 | tail -25 | tee "$OUT/gemm_dropin.log"
