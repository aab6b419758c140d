#!/usr/bin/env bash
# The tunekit part of experiments/learned_search.py on the device machine's CPU cores (the replay
# needs no GPU; the machine has 16-32 cores against 2 here). Resumable: the runs so far travel in
# .ls_runs/ (carried) and come back under $OUT. Set up here first:
#   pip wheel --no-deps -w .whl <a checkout of the commit>; cp -r ../shared/spaces/kerneltuner .spaces/
# then run with carry [".whl", ".spaces", ".ls_runs"]; STOP_AFTER (s) bounds one call; STRATEGIES
# ("optuna-gp", space-separated) replays those instead of the part's own.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site TUNEKIT_SHARED_SPACES="$PWD/.spaces" OMP_NUM_THREADS=1  # one thread per replay process
mkdir -p .ls_runs && cp -r .ls_runs "$OUT/"  # runs are appended under $OUT: a call cut off keeps them
repo="$PWD"
(cd /tmp && python3 "$repo/experiments/learned_search.py" --part "${PART:-tunekit}" --out "$OUT/.ls_runs" \
    $(for s in ${STRATEGIES:-}; do printf -- '--strategy %s ' "$s"; done) --jobs "$(nproc)" --stop-after "${STOP_AFTER:-450}" > "$OUT/report.md" 2> "$OUT/log.txt")
rc=$?
tail -5 "$OUT/log.txt"
exit $rc
