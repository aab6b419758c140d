#!/usr/bin/env bash
# One device call on the single-GPU kind (nvidia-h200: one H200, 16 cores) recording the corpus
# families of record_spaces.py completely (every config of each Space at each of its 4 shapes):
# cross_entropy, layernorm_backward, conv2d, grouped_gemm, fp8_gemm, fused_moe, in that order
# (cheapest first). The families are recorded one after another, so their timings never overlap on
# the GPU; within a family the compile workers overlap its timing, as record_spaces.py does.
#
# Expects the wheels of tunekit and its missing dependencies in .whl/ (benchmarks/README.md), with
# tunekit's wheel rebuilt from this commit, since the kernels travel in it
# (`pip wheel --no-deps -w .whl . && git rev-parse --short HEAD > .whl/COMMIT`); carry [".whl"].
#
#   OUT (out): $OUT/smoke.log, $OUT/<family>/ (store.db, recorded.json, written as the recording
#     goes), $OUT/<family>.log, $OUT/spaces/ (Kernel Tuner files and index.json of every shape finished)
#     and $OUT/corpus-spaces.tgz, the spaces and recorded.json files in one archive (the device tool
#     brings back a limited number of files: only the archive is sure to come back)
#   LIMIT_S (540): seconds from the start of this script, the install included, after which the
#     recording stops: the family under way keeps the shapes it finished, later ones are not started;
#     the export follows, within EXPORT_S (40) more
#   KERNELS: the families and their order; WORKERS (15): compile workers; WARMUP, REP (5, 25): do_bench's ms
#   SMOKE_S (120): the smoke's limit. A family whose smoke fails, or hangs (the smoke stopped in it),
#     is not recorded; one the smoke did not reach is.
# Export elsewhere afterwards, or again: python experiments/record_spaces.py --out OUT/<family> ... --export DIR
# A dry run of this script on a CPU (the interpreter, tiny shapes, 3 configs per space):
#   SKIP_INSTALL=1 RECORD_ARGS=--quick OUT=/tmp/corpus-dry bash experiments/run_h200_record_corpus.sh
set -uo pipefail
start=$SECONDS
OUT=${OUT:-out}; mkdir -p "$OUT"
LIMIT_S=${LIMIT_S:-540}; EXPORT_S=${EXPORT_S:-40}; SMOKE_S=${SMOKE_S:-120}
KERNELS=${KERNELS:-"cross_entropy layernorm_backward conv2d grouped_gemm fp8_gemm fused_moe"}
WORKERS=${WORKERS:-15}; WARMUP=${WARMUP:-5}; REP=${REP:-25}
RECORD_ARGS=${RECORD_ARGS:-}
source "$(dirname "${BASH_SOURCE[0]}")/../benchmarks/device_env.sh"
# a cold cache, so that each config's recorded compile time is a real compile, even when an earlier
# call on the same machine compiled these kernels
export TRITON_CACHE_DIR=$(mktemp -d /tmp/triton-cache-XXXX)
left() { echo $(( LIMIT_S - (SECONDS - start) )); }
[[ -f .whl/COMMIT ]] && echo "wheel: $(cat .whl/COMMIT)"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.is_available() and torch.cuda.get_device_name())"
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader 2>/dev/null
echo "cores: $(nproc)"

echo "== smoke: the first config of each family at its quick shapes, on the GPU"
timeout -k 5 "$SMOKE_S" python3 experiments/record_spaces.py --smoke $RECORD_ARGS \
    $(for k in $KERNELS; do printf -- '--kernel %s ' "$k"; done) 2>&1 | tee "$OUT/smoke.log"
families=""
for k in $KERNELS; do
    if grep -qx "SMOKE-OK $k" "$OUT/smoke.log" || ! grep -qx "SMOKE-START $k" "$OUT/smoke.log"; then
        families="$families $k"
    else
        echo "not recording $k: its smoke failed or did not finish"
    fi
done

for k in $families; do
    budget=$(left)
    if (( budget < 30 )); then echo "== $k: not started, $budget s left"; continue; fi
    echo "== $k: $(( SECONDS - start )) s so far, at most $budget s for it"
    begun=$SECONDS
    timeout -k 10 "$budget" python3 experiments/record_spaces.py --kernel "$k" --workers "$WORKERS" \
        --warmup "$WARMUP" --rep "$REP" --out "$OUT/$k" $RECORD_ARGS > "$OUT/$k.log" 2>&1
    echo "   exit status $?, $(( SECONDS - begun )) s"
    grep -E " configs, " "$OUT/$k.log" | sed 's/^/   /'
done

echo "== export: $(( SECONDS - start )) s so far"
outs=()
for k in $families; do
    if [[ -f "$OUT/$k/recorded.json" && -f "$OUT/$k/store.db" ]]; then outs+=(--out "$OUT/$k"); fi
done
if (( ${#outs[@]} )); then
    timeout -k 5 "$EXPORT_S" python3 experiments/record_spaces.py "${outs[@]}" --export "$OUT/spaces" | tail -n 30
    [[ -f "$OUT/spaces/index.json" ]] && python3 experiments/record_spaces.py --table "$OUT/spaces/index.json" || true
fi
# one archive: the device tool returns a limited number of files from $OUT
(cd "$OUT" && tar czf corpus-spaces.tgz spaces */recorded.json 2>/dev/null) && echo "wrote $OUT/corpus-spaces.tgz"
echo "== done in $(( SECONDS - start )) s"
