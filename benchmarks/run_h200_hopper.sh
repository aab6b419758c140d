#!/usr/bin/env bash
# One device call for issue 16 (nvidia-h200): benchmarks/hopper_live.py for $PART (gemm or
# attention) and each seed of $SEEDS (default 0): smoke checks, then each shape tuned live by the
# default strategy within $SECONDS_BUDGET from a cold cache and timed interleaved with PyTorch.
# With PART=attention and RECORD=1 (the default) the call then records the Hopper attention's
# whole Space at both attention shapes (experiments/record_spaces.py, do_bench(warmup=5, rep=25));
# the GEMM's Space is recorded by experiments/run_h200_record_one.sh with KERNEL=matmul_hopper.
# Expects the wheels of tunekit and its missing dependencies in .whl/ (benchmarks/README.md);
# writes under $OUT.
set -uo pipefail
PART=${PART:-gemm}
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
OUT=${OUT:-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader; nproc
for SEED in ${SEEDS:-0}; do
    python3 benchmarks/hopper_live.py --only "$PART" --seed "$SEED" --seconds "${SECONDS_BUDGET:-120}" \
        --rounds "${ROUNDS:-15}" --json "$OUT/hopper_live_${PART}_seed$SEED.json" 2>&1 \
        | tee "$OUT/hopper_live_${PART}_seed$SEED.log" | grep -v "^ \|^%\|^#\|^}\|^{\|^module\|^$"
done
if [ "$PART" = attention ] && [ "${RECORD:-1}" = 1 ]; then
    timeout "${RECORD_LIMIT_S:-200}" python3 experiments/record_spaces.py --kernel attention_hopper \
        --workers "${WORKERS:-15}" --out "$OUT/attention_hopper" 2>&1 | tee "$OUT/attention_hopper.log" | tail -n 5
fi
