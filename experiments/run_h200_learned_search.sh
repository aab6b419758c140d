#!/usr/bin/env bash
# Parts of experiments/learned_search.py on the device machine's CPU cores (the replay needs no
# GPU; the machine has 16-32 cores against 2 here). tunekit is installed there from the working
# tree; its dependencies that the image lacks travel as wheels. Set up here first:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 ... -d .whl \
#       optuna==5.0.0 sqlalchemy alembic mako colorlog platformdirs
#   cp -r ../shared/spaces/kerneltuner .spaces/
# then run with carry [".whl", ".spaces", ".ls_runs"]. Resumable: the runs so far travel in
# .ls_runs/ and come back under $OUT/.ls_runs (a call cut off keeps them). PARTS ("tunekit
# transfer", space-separated) picks the parts (kernel_tuner needs its wheels too: kernel_tuner,
# python-constraint2 and theirs), STRATEGIES ("default optuna-gp") replays those
# instead of each part's own, STOP_AFTER (s) bounds one call.
set -uo pipefail
rm -rf /tmp/site  # a machine still warm from an earlier call keeps its copy: never replay old code
source "$(dirname "${BASH_SOURCE[0]}")/../benchmarks/device_env.sh"
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
export TUNEKIT_SHARED_SPACES="$PWD/.spaces" OMP_NUM_THREADS=1  # one thread per replay process
mkdir -p .ls_runs && cp -r .ls_runs "$OUT/"
repo="$PWD"
(cd /tmp && python3 "$repo/experiments/learned_search.py" \
    $(for p in ${PARTS:-tunekit}; do printf -- '--part %s ' "$p"; done) --out "$OUT/.ls_runs" \
    $(for s in ${STRATEGIES:-}; do printf -- '--strategy %s ' "$s"; done) --jobs "$(nproc)" \
    --stop-after "${STOP_AFTER:-450}" > "$OUT/report.md" 2> "$OUT/log.txt")
rc=$?
tail -8 "$OUT/log.txt"
exit $rc
