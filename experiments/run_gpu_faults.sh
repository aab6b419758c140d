#!/usr/bin/env bash
# One device call: experiments/gpu_faults.py on one GPU. Expects the wheels of tunekit and its
# missing dependencies in .whl/ (benchmarks/README.md); writes under $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader; nproc
python3 experiments/gpu_faults.py --out "$OUT/faults" --budget "${BUDGET:-48}" 2>&1 | tee "$OUT/gpu_faults.log"
