#!/usr/bin/env bash
# One device call: live GEMM tunings of `default` (benchmarks/inflight_live.py) by the carried
# tunekit (.whl/, tag "new") and an earlier one (.whl-old/: its tunekit wheel and COMMIT, tag
# "old"), in turns seed by seed, each from a cold cache; then the comparison and each tuning's
# timeline (where its wall time went, from its debug log). SHAPES ("square decode"), SEEDS ("0 1 2"),
# EVALS (150), TAGS ("new old"). Writes $OUT/inflight.log, compare.txt, timeline.txt and
# tunings.tar.gz (the stores and logs: a call brings back 8 files). LIMIT_S (400): no tuning
# starts after that many seconds, and none runs past it by more than TUNING_S (120), so that the
# comparison and the archive are made within the call's limit.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
OUT=$(realpath -m "${OUT:-out}"); mkdir -p "$OUT/tunings"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader; nproc
rm -rf /tmp/site-old && cp -r /tmp/site /tmp/site-old && python3 -m pip install -q --no-index --no-deps \
    --no-compile --no-cache-dir --upgrade --target /tmp/site-old .whl-old/tunekit-*.whl || exit 1
echo "new: $(cat .whl/COMMIT), old: $(cat .whl-old/COMMIT)"
for shape in ${SHAPES:-square decode}; do
    for seed in ${SEEDS:-0 1 2}; do
        for tag in ${TAGS:-new old}; do
            [ "$SECONDS" -lt "${LIMIT_S:-400}" ] || { echo "$tag $shape $seed: not started (LIMIT_S)"; continue; }
            site=/tmp/site; [ "$tag" = old ] && site=/tmp/site-old
            PYTHONPATH=$site timeout "${TUNING_S:-120}" python3 benchmarks/inflight_live.py tune --tag "$tag" --seed "$seed" \
                --shape "$shape" --evals "${EVALS:-150}" --out "$OUT/tunings" \
                --log "$OUT/tunings/$tag-$shape-$seed.log" || echo "$tag $shape $seed: exit $?"
        done
    done
done 2>&1 | grep -v "^WARNING\|warn(" | tee "$OUT/inflight.log"
python3 benchmarks/inflight_live.py compare "$OUT/tunings" | tee "$OUT/compare.txt"
for log in "$OUT"/tunings/*.log; do python3 benchmarks/inflight_live.py timeline "$log"; done > "$OUT/timeline.txt" 2>&1
tar czf "$OUT/tunings.tar.gz" -C "$OUT" tunings && rm -r "$OUT/tunings"
