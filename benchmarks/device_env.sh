# Sourced by the device scripts (benchmarks/run_h200_*.sh, experiments/run_h200_*.sh), run from the
# repository's root: installs the carried wheels (.whl/: tunekit's and the dependencies the device
# image lacks) into /tmp/site and puts it on PYTHONPATH. --upgrade, since pip --target keeps a
# package already there without it: a machine still warm from an earlier call would run old code.
# SKIP_INSTALL=1 skips the install (a script's dry run on the CPU machine).
if [[ -z "${SKIP_INSTALL:-}" ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
