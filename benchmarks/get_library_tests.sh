#!/usr/bin/env bash
# The third-party test files that benchmarks/library_tests.py runs, taken out of the libraries' git
# history into .libtests/<library>/ (ignored through .git/info/exclude: third-party code, never
# committed). Each library gets a pytest.ini of ours that stops pytest at its folder (tunekit's
# pyproject.toml would otherwise configure the run) and puts the folder on sys.path.
#
#   bash benchmarks/get_library_tests.sh [MIRROR_ROOT]      # default /work/.mirror
#   LIBRARIES="flag_gems" bash benchmarks/get_library_tests.sh   # only these (default: all three)
#
# MIRROR_ROOT holds bare clones named owner+name/repo, as the session tool `fetch` leaves them
# (fetch github:fla-org/flash-linear-attention, github:linkedin/Liger-Kernel,
# github:flagos-ai/FlagGems); a plain `git clone --bare URL MIRROR_ROOT/owner+name/repo` does as well.
# Commits (the wheels the device runs are fla-core 0.6.0, liger_kernel 0.8.5, flag_gems 5.0.2):
#   fla        bc3b101d  main of 2026-08-22, version 0.5.2 (newest held; no 0.6.0 tag, 0.6.0 is later)
#   liger      ead96b61  main of 2026-08-21, version 0.8.2 (newest held; no 0.8.5 tag, 0.8.5 is later)
#   flag_gems  30bfcc07  tag v5.0.2, the wheel's version
# (the test files of the first two import and collect against the 0.6.0 and 0.8.5 wheels)
# To the device: run with carry [".libtests"] (a few hundred KB).
set -euo pipefail
MIRROR=${1:-/work/.mirror}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/.libtests

extract() {  # LIBRARY REPO COMMIT FILE...
  local library=$1 repo=$2 commit=$3; shift 3
  case " ${LIBRARIES:-fla liger flag_gems} " in *" $library "*) ;; *) return 0 ;; esac
  local git="git --git-dir=$MIRROR/$repo/repo"
  $git cat-file -e "$commit^{commit}" 2>/dev/null \
    || { echo "missing $commit in $MIRROR/$repo/repo: fetch the repository first" >&2; exit 1; }
  rm -rf "${DEST:?}/$library"
  for file in "$@"; do
    mkdir -p "$DEST/$library/$(dirname "$file")"
    $git show "$commit:$file" > "$DEST/$library/$file"
  done
  printf '[pytest]\n# by get_library_tests.sh: %s at %s\npythonpath = .\nfilterwarnings = %s\n' \
    "$repo" "$commit" ignore::pytest.PytestUnknownMarkWarning > "$DEST/$library/pytest.ini"
  echo "$library: $repo at ${commit:0:8}: $*"
}

extract fla fla-org+flash-linear-attention bc3b101dcb713ddc5bd8924b66754eb68b5ccf89 \
  tests/conftest.py tests/ops/test_gla.py tests/ops/test_gdn.py
extract liger linkedin+Liger-Kernel ead96b618e5c67bddc6a6e9bcb99bfe6b5ab661c \
  test/__init__.py test/conftest.py test/utils.py test/transformers/test_dyt.py
extract flag_gems flagos-ai+FlagGems 30bfcc0735b8ebd48bd7339ef752ec64df69663f \
  tests/__init__.py tests/conftest.py tests/accuracy_utils.py tests/test_layer_norm.py tests/test_softmax.py \
  tests/test_mv.py tests/test_amax.py

cd "$ROOT"
EXCLUDE=$(git rev-parse --git-path info/exclude)
grep -qx '.libtests/' "$EXCLUDE" 2>/dev/null || echo '.libtests/' >> "$EXCLUDE"
