"""Every test runs real Triton kernels under the interpreter, on the CPU, against stores in
temporary directories; nothing here mocks Triton's compile or launch path."""

from __future__ import annotations

import os
import tempfile

# Before triton is imported anywhere: kernels decorated from here on are interpreted.
os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
# No test may write the user's own cache; tests that use the default store get this one.
os.environ["TUNEKIT_STORE"] = os.path.join(tempfile.mkdtemp(prefix="tunekit-tests-"), "default.db")
os.environ.pop("TUNEKIT_MODE", None)

import pytest  # noqa: E402


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "store.db"
