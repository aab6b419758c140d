#!/usr/bin/env bash
# Device call: the test suite on the device's Triton (3.6) and torch, from a clean tree of one commit.
# Expects in .whl/: the wheels of benchmarks/README.md, tunekit's built from that commit, and
# head.tar (`git archive HEAD -o .whl/head.tar`). Writes $OUT/tests.log. TEST_GROUPS=N (1): the test
# files dealt round-robin to N pytest processes at once (their logs one after another), so that
# the suite fits one call on the machine's cores. TEST_MARK ("not slow"): pytest's -m ("slow": the
# slow suite).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
OUT=$(realpath -m "${OUT:-out}"); mkdir -p "$OUT" /tmp/src && tar xf .whl/head.tar -C /tmp/src
# tests that start Python with a PYTHONPATH of their own, and the documentation's examples, expect
# tunekit installed: a .pth in the interpreter's site-packages puts the carried wheels there for
# every process
echo /tmp/site > "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/tunekit-device-site.pth"
export PATH=/tmp/site/bin:$PATH  # the `tunekit` command, which pip --target puts there
groups=${TEST_GROUPS:-1}
mapfile -t files < <(cd /tmp/src && ls tests/test_*.py)
cd /tmp
for ((k = 0; k < groups; k++)); do
    share=()
    for ((i = k; i < ${#files[@]}; i += groups)); do share+=("/tmp/src/${files[i]}"); done
    PYTHONPATH=/tmp/site OMP_NUM_THREADS=2 timeout "${TEST_TIMEOUT:-500}" python3 -m pytest "${share[@]}" -q \
        -m "${TEST_MARK:-not slow}" -p no:cacheprovider --basetemp "/tmp/pytest-$k" \
        > "$OUT/tests-$k.log" 2>&1 &
done
wait
# one file: a call brings back at most 8
for ((k = 0; k < groups; k++)); do echo "== group $k"; cat "$OUT/tests-$k.log"; rm "$OUT/tests-$k.log"; done > "$OUT/tests.log"
grep -E "^== group|passed|failed|^FAILED|^ERROR" "$OUT/tests.log"
python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)" | tee -a "$OUT/tests.log"
