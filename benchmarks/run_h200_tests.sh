#!/usr/bin/env bash
# Device call: the test suite on the device's Triton (3.6) and torch, from a clean tree of one commit.
# Expects in .whl/: the wheels of benchmarks/README.md, tunekit's built from that commit, and
# head.tar (`git archive HEAD -o .whl/head.tar`). Writes $OUT/tests.log.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
OUT=${OUT:-out}; mkdir -p "$OUT" /tmp/src && tar xf .whl/head.tar -C /tmp/src
cd /tmp && PYTHONPATH=/tmp/site timeout "${TEST_TIMEOUT:-500}" python3 -m pytest /tmp/src/tests -q -p no:cacheprovider \
    2>&1 | tail -60 | tee "$OUT/tests.log"
python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)" | tee -a "$OUT/tests.log"
