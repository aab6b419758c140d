#!/usr/bin/env bash
# One device call replaying experiments/transfer_cv.py on the machine's cores. Expects, carried:
# .whl/ (tunekit's wheel and its missing dependencies), .spaces/ (the community's spaces: the
# corpus names some), and optionally .runs/transfer.jsonl.gz, the runs of an earlier call to
# resume from. Writes $OUT/transfer/runs.jsonl.gz; the report is made where the runs are fetched to.
# CORPUS (experiments/corpus/v1.json): the corpus manifest; DESIGNS, BASE, CANDIDATES: transfer_cv.py's
# --designs, --base, --candidates (issue 31's files); SEEDS (20), JOBS (16); STOP_AFTER (420): seconds
# after which no tuning starts; LIMIT_S (540): the script's limit.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../benchmarks/device_env.sh"
export TUNEKIT_SHARED_SPACES=$PWD/.spaces
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1   # one core per replay
OUT=${OUT:-out}; mkdir -p "$OUT/transfer"
[ -f .runs/transfer.jsonl.gz ] && cp .runs/transfer.jsonl.gz "$OUT/transfer/runs.jsonl.gz"
cat .whl/COMMIT
timeout "${LIMIT_S:-540}" python3 experiments/transfer_cv.py --corpus "${CORPUS:-experiments/corpus/v1.json}" --designs "${DESIGNS:-experiments/corpus/designs-v5.json}" \
    --base "${BASE:-default-interleave10-radius2-late8}" --candidates "${CANDIDATES:-experiments/corpus/transfer-designs.json}" \
    --seeds "${SEEDS:-20}" --jobs "${JOBS:-16}" --stop-after "${STOP_AFTER:-420}" --replay-only --out "$OUT/transfer" \
    > "$OUT/transfer.log" 2>&1
echo "exit $?"; tail -n 3 "$OUT/transfer.log"; python3 -c "import gzip,sys; print(sum(1 for _ in gzip.open(sys.argv[1], 'rt')), 'runs')" "$OUT/transfer/runs.jsonl.gz"
