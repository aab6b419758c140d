#!/usr/bin/env bash
# One device call: does the in-flight fingerprint (experiments/replay_fingerprint.py --in-flight-only)
# depend on the CPU through NumPy's own SIMD maths? Runs it with the carried tunekit (.whl/) and with
# an earlier one (.whl-old/: its tunekit wheel alone, the dependencies from .whl/), each with NumPy
# dispatching as the CPU allows and with its AVX-512 code turned off (NPY_DISABLE_CPU_FEATURES), four
# processes at once, each with one OpenMP/BLAS thread (not pinned to a core). Prints the CPU and
# NumPy's features first. Carry .whl, .whl-old, .spaces.
# Writes $OUT/LABEL.json (every tuning's times), $OUT/LABEL.log (its digest) and
# $OUT/environment.txt (the CPU, Python, the commits and NumPy's features as printed).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../benchmarks/device_env.sh"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-old \
    .whl-old/*.whl || exit 1
export TUNEKIT_SHARED_SPACES=$PWD/.spaces OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=${OUT:-out}; mkdir -p "$OUT"
ROOT=$PWD
NO_AVX512=${NO_AVX512:-X86_V4 AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR}
features() { (cd /tmp && env "$@" python3 -c "import numpy; from numpy._core._multiarray_umath import __cpu_features__ as f; print('numpy', numpy.__version__, [k for k, v in f.items() if v and ('512' in k or 'V4' in k)])" 2>&1 | tail -n 1); }
{   # what ran, kept beside the results ($OUT/environment.txt)
    lscpu | grep -E 'Model name|^CPU\(s\)'; lscpu | grep -o 'avx512[a-z0-9_]*' | sort -u | tr '\n' ' '; echo
    python3 --version
    echo "carried $(cat .whl/COMMIT), old $(cat .whl-old/COMMIT)"
    echo "as the CPU allows: $(features)"
    echo "AVX-512 off: $(features NPY_DISABLE_CPU_FEATURES="$NO_AVX512")"
} 2>&1 | tee "$OUT/environment.txt"
run() {  # LABEL PYTHONPATH [ENV...]
    local label=$1 path=$2; shift 2
    (cd /tmp && env PYTHONPATH="$path" "$@" timeout "${LIMIT_S:-500}" python3 "$ROOT/experiments/replay_fingerprint.py" \
        --in-flight-only --out "$OUT/$label.json" > "$OUT/$label.log" 2>&1) &
}
run carried /tmp/site
run carried-no-avx512 /tmp/site NPY_DISABLE_CPU_FEATURES="$NO_AVX512"
run old /tmp/site-old:/tmp/site
run old-no-avx512 /tmp/site-old:/tmp/site NPY_DISABLE_CPU_FEATURES="$NO_AVX512"
wait
for label in carried carried-no-avx512 old old-no-avx512; do echo "$label: $(tail -n 1 "$OUT/$label.log")"; done
