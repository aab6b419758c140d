#!/usr/bin/env bash
# One device call on the two-GPU kind (nvidia-h200-x2, 32 cores) recording complete spaces: the
# kernels named in $GPU0_KERNELS on GPU 0 and those in $GPU1_KERNELS on GPU 1, side by side,
# each with its own compile workers. Expects the wheels of tunekit and its missing dependencies
# in .whl/ (benchmarks/README.md). The stores and recorded.json files under $OUT are written as
# the recording goes, so a run cut off at $LIMIT_S keeps what it finished.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../benchmarks/device_env.sh"
OUT=${OUT:-out}; mkdir -p "$OUT"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(), torch.cuda.device_count())"
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
nproc
echo "== smoke: vector_add through the compile pool"
CUDA_VISIBLE_DEVICES=0 python3 experiments/record_spaces.py --kernel vector_add --workers 4 --out "$OUT/smoke" || exit 1
kernels() { for k in $1; do printf -- '--kernel %s ' "$k"; done; }
LIMIT_S=${LIMIT_S:-520}
CUDA_VISIBLE_DEVICES=0 timeout "$LIMIT_S" python3 experiments/record_spaces.py $(kernels "$GPU0_KERNELS") \
    --workers "${GPU0_WORKERS:-19}" --out "$OUT/gpu0" > "$OUT/gpu0.log" 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout "$LIMIT_S" python3 experiments/record_spaces.py $(kernels "$GPU1_KERNELS") \
    --workers "${GPU1_WORKERS:-11}" --out "$OUT/gpu1" > "$OUT/gpu1.log" 2>&1 &
wait
tail -n 20 "$OUT/gpu0.log" "$OUT/gpu1.log"
