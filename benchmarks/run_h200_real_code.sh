#!/usr/bin/env bash
# Device call for real code (the drop-in on third-party libraries and first calls): expects the
# wheels of tunekit and its missing dependencies (and fla-core) in .whl/ (benchmarks/README.md).
#   PART=first: benchmarks/first_call.py, vector add decorated before and after CUDA is up
#               (2 configs) and the bf16 GEMM's 8- and 16-config lists, RUNS rounds (default 5)
#   PART=libs:  benchmarks/real_libraries.py, OPS (default both fla ops), ROUNDS rounds (default 3),
#               VARIANTS (default "stock tk"; tk_patch: the library imported under tunekit.patch_triton())
#   PART=diagnose: cProfiles of vadd's and vadd_late's first calls, then one round of OPS (default liger:dyt
#               flag_gems:layer_norm) with cProfiles of the first calls, outputs compared part by part
#   PART=anatomy_libs: first a cProfile of one vadd_late first call, tunekit's and stock's, then PART=libs
#   PART=suite: PART=first with KINDS (default vadd vadd_late gemm16), then PART=libs with OPS (default
#               liger:dyt flag_gems:layer_norm flag_gems:softmax), each within its share of TIMEOUT
#   PART=libtests: benchmarks/library_tests.py, the libraries' own tests of their autotuned ops, LIBRARIES
#               (default all three), VARIANTS (default "stock tk"; tk_patch as above) within BUDGET
#               (needs .libtests/, made by benchmarks/get_library_tests.sh, carried)
# Writes PART's .json and .log under $OUT, and what ran (GPU, versions, tunekit's commit) to
# $OUT/environment.txt.
set -uo pipefail
[ -n "${INSTALLED:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export INSTALLED=1 TUNEKIT_COMMIT=${TUNEKIT_COMMIT:-$(cat .whl/COMMIT 2>/dev/null)}
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-out}; mkdir -p "$OUT"
{   # what ran, kept beside the results ($OUT/environment.txt; PART=suite and anatomy_libs add a block per part)
    echo "PART=${PART:-first}"
    nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader; nproc
    (cd /tmp && python3 -c "import triton, torch, tunekit; print('triton', triton.__version__, 'torch', torch.__version__, 'tunekit', tunekit.__file__)")
    echo "tunekit wheel built at ${TUNEKIT_COMMIT:-unknown}"
} 2>&1 | tee -a "$OUT/environment.txt"
case "${PART:-first}" in
  first)
    timeout "${TIMEOUT:-560}" python3 benchmarks/first_call.py --kinds ${KINDS-vadd vadd_late gemm8 gemm16} \
        --runs "${RUNS:-5}" --json "$OUT/first_call.json" 2>&1 | tee "$OUT/first_call.log" ;;
  diagnose)
    for kind in vadd vadd_late; do
      for variant in tk stock; do
        python3 benchmarks/first_call.py --one "$kind:$variant" --profile "$OUT/$kind-$variant.prof" \
            2> "$OUT/$kind-$variant.profile.txt" | tee -a "$OUT/anatomy.log"
      done
    done
    timeout "${TIMEOUT:-400}" python3 benchmarks/real_libraries.py --ops ${OPS-liger:dyt flag_gems:layer_norm} \
        --rounds "${ROUNDS:-1}" --budget "${BUDGET:-350}" --profile-dir "$OUT" --json "$OUT/real_libraries.json" 2>&1 \
        | tee "$OUT/real_libraries.log"
    for prof in "$OUT"/*-tk.prof "$OUT"/*-stock.prof; do
      python3 -c "import pstats,sys; s=pstats.Stats(sys.argv[1]); s.sort_stats('cumulative').print_stats(60); s.sort_stats('tottime').print_stats(25)" \
          "$prof" > "${prof%.prof}.stats.txt" 2>&1
    done
    (cd "$OUT" && tar czf profiles.tar.gz *.prof *.stats.txt *.profile.txt && rm -f *.prof *.stats.txt *.profile.txt) ;;
  anatomy_libs)
    for variant in tk stock; do
      python3 benchmarks/first_call.py --one "vadd_late:$variant" --profile "$OUT/vadd_late-$variant.prof" \
          2> "$OUT/vadd_late-$variant.profile.txt" | tee -a "$OUT/anatomy.log"
    done
    PART=libs TIMEOUT=${TIMEOUT:-450} BUDGET=${BUDGET:-380} bash "$0" ;;
  suite)
    KINDS=${KINDS-vadd vadd_late gemm16} PART=first TIMEOUT=${FIRST_TIMEOUT:-240} bash "$0"
    OPS=${OPS-liger:dyt flag_gems:layer_norm flag_gems:softmax} PART=libs TIMEOUT=${LIBS_TIMEOUT:-320} \
        BUDGET=${BUDGET:-290} ROUNDS=${ROUNDS:-5} bash "$0" ;;
  libtests)
    timeout "${TIMEOUT:-570}" python3 benchmarks/library_tests.py --libraries ${LIBRARIES-liger flag_gems fla} \
        --variants ${VARIANTS-stock tk} --budget "${BUDGET:-540}" --json "$OUT/library_tests.json" 2>&1 \
        | tee "$OUT/library_tests.log" ;;
  libs)
    timeout "${TIMEOUT:-570}" python3 benchmarks/real_libraries.py --ops ${OPS-fla:chunk_gla fla:chunk_gated_delta_rule} \
        --variants ${VARIANTS-stock tk} --rounds "${ROUNDS:-3}" --budget "${BUDGET:-480}" \
        --json "$OUT/real_libraries.json" 2>&1 | tee "$OUT/real_libraries.log" ;;
esac
