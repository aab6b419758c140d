#!/usr/bin/env bash
# One device call replaying the leave-family-out protocol (experiments/leave_family_out.py) on the
# machine's cores. Expects, carried: .whl/ (tunekit's wheel and its missing dependencies,
# benchmarks/README.md), .spaces/ (a copy of the community's spaces: their kerneltuner/ folder),
# and optionally .runs/runs.jsonl.gz, the runs of an earlier call to resume from. Writes
# $OUT/protocol/runs.jsonl.gz as it goes and report.md at the end (unless REPORT=0). TIME_ALONE=N
# first times each strategy alone on the largest space, N tunings each ($OUT/protocol/timing.json).
# TRANSFER="LABEL ..." replays those labels again with the store holding the kernel's other shapes.
# ONLY="LABEL ..." replays those labels' runs alone (labels without spaces: not "LABEL + store");
# FAMILIES="FAMILY ..." those families' spaces alone (with REPORT=0: a report needs every space's runs).
# BASELINES="NAME ..." the baselines replayed beside the designs (unset: random rf lfbo; empty or
# only white space: none). INCUMBENT=LABEL: the design that ships now, which the report's choices
# keep unless another leads it by more than the seeds move the lead.
set -uo pipefail
if [ -n "${FAMILIES:-}" ] && [ "${REPORT:-1}" = 1 ]; then
    echo "FAMILIES=$FAMILIES needs REPORT=0: a report needs every space's runs" >&2; exit 2
fi
source "$(dirname "${BASH_SOURCE[0]}")/../benchmarks/device_env.sh"
export TUNEKIT_SHARED_SPACES=$PWD/.spaces
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1   # one core per replay
OUT=${OUT:-out}; mkdir -p "$OUT/protocol"
[ -f .runs/runs.jsonl.gz ] && cp .runs/runs.jsonl.gz "$OUT/protocol/"
nproc; python3 -c "import os; print('cpu_count', os.cpu_count(), 'affinity', len(os.sched_getaffinity(0)))"; (cd /tmp && python3 -c "import numpy, scipy, sklearn, optuna, tunekit; print('numpy', numpy.__version__, 'scipy', scipy.__version__, 'sklearn', sklearn.__version__, 'optuna', optuna.__version__, 'tunekit', tunekit.__version__)")
cat .whl/COMMIT
baselines() {
    local names=${BASELINES-random rf lfbo}
    [[ $names =~ ^[[:space:]]*$ ]] && { printf -- '--no-baselines '; return; }
    for b in $names; do printf -- '--baseline %s ' "$b"; done
}
transfers() { for t in ${TRANSFER:-}; do printf -- '--transfer %s ' "$t"; done; }   # TRANSFER="LABEL ...": with the store too
only() { for l in ${ONLY:-}; do printf -- '--only %s ' "$l"; done; }
families() { for f in ${FAMILIES:-}; do printf -- '--family %s ' "$f"; done; }
incumbent() { [[ ${INCUMBENT:-} =~ ^[[:space:]]*$ ]] || printf -- '--incumbent %s ' "$INCUMBENT"; }
timeout "${LIMIT_S:-540}" python3 experiments/leave_family_out.py --corpus "${CORPUS:-experiments/corpus/v1.json}" \
    --designs "${DESIGNS:-experiments/corpus/designs.json}" $(baselines) $(transfers) $(only) $(families) $(incumbent) --seeds "${SEEDS:-5}" \
    --jobs "${JOBS:-16}" --stop-after "${STOP_AFTER:-420}" --time-alone "${TIME_ALONE:-0}" $([ "${REPORT:-1}" = 1 ] || echo --replay-only) --out "$OUT/protocol" > "$OUT/protocol.log" 2>&1
echo "exit $?"
tail -n 5 "$OUT/protocol.log"
[ "${REPORT:-1}" = 1 ] || exit 0   # REPORT=0: the report is made where the runs are fetched to (it takes minutes)
python3 experiments/leave_family_out.py --corpus "${CORPUS:-experiments/corpus/v1.json}" \
    --designs "${DESIGNS:-experiments/corpus/designs.json}" $(baselines) $(transfers) $(incumbent) --seeds "${SEEDS:-5}" \
    --out "$OUT/protocol" --report-only > /dev/null && head -n 30 "$OUT/protocol/report.md"
