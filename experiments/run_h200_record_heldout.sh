#!/usr/bin/env bash
# One device call (nvidia-h200) recording the held-out GEMM shapes of issue 15's heuristics
# (record_spaces.py's matmul_heldout suite: 14 shapes, the whole 984-config space at each) with
# do_bench(warmup=2, rep=10), so that the compile of the first shape and 13 more shapes fit one
# 10-minute command. Expects the wheels of tunekit and its missing dependencies in .whl/
# (benchmarks/README.md). The store and recorded.json under $OUT are written shape by shape, so a
# run cut off at $LIMIT_S keeps what it finished; export them afterwards, anywhere:
#   python experiments/record_spaces.py --out DIR --export experiments/results/heuristics/spaces
# SHAPES="--shape NAME ..." records only those (a second call for what the first left).
set -uo pipefail
SHAPES=${SHAPES:-}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT/heldout"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
timeout "${LIMIT_S:-540}" python3 experiments/record_spaces.py --kernel matmul_heldout --workers "${WORKERS:-15}" \
    --warmup 2 --rep 10 --out "$OUT/heldout" $SHAPES 2>&1 | tee "$OUT/heldout.log"
ls -la "$OUT/heldout"
