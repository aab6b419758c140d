#!/usr/bin/env bash
# Device call: the test suite on the device's Triton (3.6) and torch, from a clean tree of one commit.
# Expects in .whl/: the wheels of benchmarks/README.md, tunekit's built from that commit, and
# head.tar (`git archive HEAD -o .whl/head.tar`). Writes $OUT/tests.log. TEST_GROUPS=N (1): the test
# files dealt round-robin to N pytest processes at once (their logs one after another), so that
# the suite fits one call on the machine's cores. TEST_MARK ("not slow"): pytest's -m ("slow": the
# slow suite). Exits 1 where a group failed or ran out of time (TEST_TIMEOUT seconds).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
OUT=$(realpath -m "${OUT:-out}"); mkdir -p "$OUT" /tmp/src && tar xf .whl/head.tar -C /tmp/src
mapfile -t files < <(cd /tmp/src && ls tests/test_*.py)
groups=${TEST_GROUPS:-1}
if ! [[ $groups =~ ^[1-9][0-9]*$ ]] || (( groups > ${#files[@]} )); then
    echo "TEST_GROUPS=$groups: expected a whole number from 1 to ${#files[@]} (the test files)" >&2; exit 2
fi
# tests that start Python with a PYTHONPATH of their own, and the documentation's examples, expect
# tunekit installed: a .pth in the interpreter's site-packages puts the carried wheels there for
# every process (removed at the end: a warm machine's next call may run other code)
site_packages=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || exit 1
pth="$site_packages/tunekit-device-site.pth"
echo /tmp/site > "$pth" || { echo "cannot write $pth: tests that set PYTHONPATH would miss tunekit" >&2; exit 1; }
trap 'rm -f "$pth"' EXIT
export PATH=/tmp/site/bin:$PATH  # the `tunekit` command, which pip --target puts there
cd /tmp
pids=()
for ((k = 0; k < groups; k++)); do
    share=()
    for ((i = k; i < ${#files[@]}; i += groups)); do share+=("/tmp/src/${files[i]}"); done
    PYTHONPATH=/tmp/site OMP_NUM_THREADS=2 timeout "${TEST_TIMEOUT:-500}" python3 -m pytest "${share[@]}" -q \
        -m "${TEST_MARK:-not slow}" -p no:cacheprovider --basetemp "/tmp/pytest-$k" \
        > "$OUT/tests-$k.log" 2>&1 &
    pids+=($!)
done
status=0
for ((k = 0; k < groups; k++)); do
    wait "${pids[k]}"; rc=$?
    # pytest's 5: every test of the group deselected (a group without slow tests)
    if (( rc != 0 && rc != 5 )); then echo "group $k exited $rc" >&2; status=1; fi
done
# one file: a call brings back at most 8
for ((k = 0; k < groups; k++)); do echo "== group $k"; cat "$OUT/tests-$k.log"; rm "$OUT/tests-$k.log"; done > "$OUT/tests.log"
grep -E "^== group|passed|failed|^FAILED|^ERROR" "$OUT/tests.log"
python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)" | tee -a "$OUT/tests.log"
exit $status
