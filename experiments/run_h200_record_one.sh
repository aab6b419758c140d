#!/usr/bin/env bash
# One device call (nvidia-h200) recording one suite of record_spaces.py ($KERNEL) with
# do_bench(warmup=2, rep=10), so that the compile of the first shape and the other shapes fit one
# 10-minute command:
#   KERNEL=matmul_heldout: the held-out GEMM shapes of issue 15's heuristics (14 shapes, the whole
#     984-config space at each; the default);
#   KERNEL=matmul_unconstrained: the 1,152-config GEMM space without its shared-memory constraint at
#     the four shipped GEMM shapes (issue 13's failure avoidance);
#   KERNEL=matmul_hopper: the Hopper GEMM's space (kernels/matmul_hopper.py) at the four shipped GEMM
#     shapes (issue 16).
# Expects the wheels of tunekit and its missing dependencies in .whl/ (benchmarks/README.md). The store and recorded.json under $OUT are written shape by shape, so a
# run cut off at $LIMIT_S keeps what it finished; export them afterwards, anywhere:
#   python experiments/record_spaces.py --out DIR --export experiments/results/heuristics/spaces
# (the held-out shapes' directory; experiments/results/unconstrained/spaces for the unconstrained
# suite; the Hopper GEMM's recordings ship with the others in kernels/h200, see kernels/shipped.py).
# SHAPES="--shape NAME ..." records only those (a second call for what the first left).
set -uo pipefail
SHAPES=${SHAPES:-}
KERNEL=${KERNEL:-matmul_heldout}
source "$(dirname "${BASH_SOURCE[0]}")/../benchmarks/device_env.sh"
OUT=${OUT:-out}; mkdir -p "$OUT/$KERNEL"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
timeout "${LIMIT_S:-540}" python3 experiments/record_spaces.py --kernel "$KERNEL" --workers "${WORKERS:-15}" \
    --warmup 2 --rep 10 --out "$OUT/$KERNEL" $SHAPES 2>&1 | tee "$OUT/$KERNEL.log"
ls -la "$OUT/$KERNEL"
