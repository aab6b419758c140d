#!/usr/bin/env bash
# One device call timing strategies alone on the corpus's largest space, as the protocol's
# --time-alone does (experiments/leave_family_out.py's time_alone): CPU time and wall time per
# proposed config, and the threads the process ran, in $OUT/timing.json and $OUT/time-alone.log.
# Expects, carried: .whl/ and .spaces/ (as experiments/run_h200_protocol.sh). Env: CORPUS (v2's
# manifest by default), DESIGNS (a designs file), ONLY ("LABEL ..." of it, all when empty),
# BASELINES, SEEDS (tunings each).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../benchmarks/device_env.sh"
export TUNEKIT_SHARED_SPACES=$PWD/.spaces
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=${OUT:-out}; mkdir -p "$OUT"
{ echo "wheel $(cat .whl/COMMIT)"; lscpu | grep -i "model name"; } | tee "$OUT/time-alone.log"
python3 - "$OUT" >> "$OUT/time-alone.log" 2>&1 <<'PY'
import json, os, sys, threading
from pathlib import Path
sys.path = [os.path.abspath("experiments")] + [p for p in sys.path if p not in ("", os.getcwd())]  # tunekit: the wheel's
import leave_family_out as protocol

designs = json.loads(Path(os.environ.get("DESIGNS", "experiments/corpus/designs-gp-stalled-c256.json")).read_text())
only = os.environ.get("ONLY", "").split()
labels = protocol.contenders({k: v for k, v in designs.items() if not only or k in only},
                             os.environ.get("BASELINES", "").split())
protocol.time_alone(Path(os.environ.get("CORPUS", "experiments/corpus/v2.json")), labels, Path(sys.argv[1]),
                    int(os.environ.get("SEEDS", "3")))
threads = next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("Threads:"))
print(f"the process's threads after the tunings: {threads} (Python's: {threading.active_count()}); "
      f"cores it may use: {len(os.sched_getaffinity(0))}", file=sys.stderr)
PY
echo "exit $?"; tail -n 20 "$OUT/time-alone.log"
