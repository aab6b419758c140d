#!/usr/bin/env bash
# One device call replaying the held-out families of corpus v2 (experiments/corpus/h200-heldout/,
# recorded after every design choice of `default`) on the machine's cores, three `tunekit compare`
# runs in turn (the figures of experiments/heldout_figures.py do not mix strategies, so the runs
# may be split):
#   $OUT/alone:  default, random, rf, lfbo with an empty store;
#   $OUT/stored: default with the store holding the family's other shapes (--transfer);
#   $OUT/gp:     optuna-gp with an empty store (the slowest to ask, last).
# Kernel Tuner is not on the device image: its genetic algorithm is replayed on the CPU machine
# (experiments/results/heldout-v2/README.md). Expects .whl/ carried (tunekit's wheel and the
# dependencies the image lacks). Writes $OUT/heldout.tgz, every output in one archive.
#   SEEDS (20), BUDGET (200), JOBS (16), LIMIT_S (500): seconds for the three runs together
# A dry run on the CPU machine: SKIP_INSTALL=1 SEEDS=1 BUDGET=5 JOBS=2 OUT=/tmp/heldout bash experiments/run_h200_heldout.sh
set -uo pipefail
start=$SECONDS
source "$(dirname "${BASH_SOURCE[0]}")/../benchmarks/device_env.sh"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1   # one core per replay
OUT=${OUT:-out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
SEEDS=${SEEDS:-20}; BUDGET=${BUDGET:-200}; JOBS=${JOBS:-16}; LIMIT_S=${LIMIT_S:-500}
SPACES=$PWD/experiments/corpus/h200-heldout/*.json.gz
[[ -z "${SKIP_INSTALL:-}" ]] && cat .whl/COMMIT
python3 -c "import numpy, sklearn, optuna; print('numpy', numpy.__version__, 'sklearn', sklearn.__version__, 'optuna', optuna.__version__)"
echo "cores: $(python3 -c 'import os; print(len(os.sched_getaffinity(0)))') usable"
run() {  # name, then compare's strategy arguments
    local name=$1; shift
    local left=$(( LIMIT_S - (SECONDS - start) ))
    if (( left < 20 )); then echo "== $name: not started, $left s left"; return; fi
    echo "== $name: at most $left s"
    begun=$SECONDS
    # from $OUT: the repository's own tunekit/ folder, on sys.path from its root, lacks the plugin packages
    (cd "$OUT" && timeout "$left" python3 -m tunekit.cli compare --space "$SPACES" "$@" --seeds "$SEEDS" --budget "$BUDGET" \
        --jobs "$JOBS" --no-progress --out "$OUT/$name" > "$OUT/$name.log" 2>&1)
    echo "   exit status $?, $(( SECONDS - begun )) s"; tail -n 2 "$OUT/$name.log"
}
run alone --strategy default --strategy random --strategy rf --strategy lfbo
run stored --strategy default --transfer
run gp --strategy optuna-gp
also=()
[[ -f "$OUT/gp/summary.csv" ]] && also=(--also "$OUT/gp")
if [[ -f "$OUT/alone/summary.csv" && -f "$OUT/stored/summary.csv" ]]; then
    python3 experiments/heldout_figures.py "$OUT/alone" "$OUT/stored" "${also[@]}" --spaces "$SPACES" | tee "$OUT/figures.md"
else
    echo "no figures: a compare run did not finish"
fi
parts=(); for part in alone stored gp figures.md; do [[ -e "$OUT/$part" ]] && parts+=("$part"); done
shopt -s nullglob
(cd "$OUT" && tar czf heldout.tgz --exclude='*.png' "${parts[@]}" ./*.log); ls -la "$OUT/heldout.tgz"
echo "== done in $(( SECONDS - start )) s"
