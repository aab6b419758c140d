"""Every test runs real Triton kernels under the interpreter, on the CPU, against stores in
temporary directories; nothing here mocks Triton's compile or launch path."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

# Before triton is imported anywhere: kernels decorated from here on are interpreted.
os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
# No test may write the user's own cache; tests that use the default store get this one, removed
# when the test session's process ends (not a forked child's: the session still uses it).
_DEFAULT_STORE_DIR = tempfile.mkdtemp(prefix="tunekit-tests-")
_SESSION_PID = os.getpid()
atexit.register(lambda: os.getpid() == _SESSION_PID and shutil.rmtree(_DEFAULT_STORE_DIR, ignore_errors=True))
os.environ["TUNEKIT_STORE"] = os.path.join(_DEFAULT_STORE_DIR, "default.db")
os.environ.pop("TUNEKIT_MODE", None)

import pytest  # noqa: E402


@pytest.fixture
def spread():
    """``spread(module, count=3)``: ``count`` configs spread over the order of a kernel module's
    Space, its first and last included (the kernel tests' sample of a space)."""
    def configs_of(module, count: int = 3) -> list[dict]:
        configs = module.space().configs()
        picks = sorted({round(i * (len(configs) - 1) / (count - 1)) for i in range(count)})
        return [configs[i].all_kwargs() for i in picks]

    return configs_of


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "store.db"


@pytest.fixture
def usage_error(capsys):
    """Run the ``tunekit`` command line expecting a usage error: it exits with code 2 (argparse's
    own errors and tunekit's alike); the last line it printed on stderr is returned."""
    from tunekit.cli import main

    def run(argv: list[str]) -> str:
        try:
            code = main(argv)
        except SystemExit as exited:
            code = exited.code
        lines = capsys.readouterr().err.strip().splitlines()
        assert code == 2, f"exit code {code}: {lines[-3:]}"
        return lines[-1] if lines else ""

    return run


@pytest.fixture
def make_read_only():
    """Makes a directory and its files read-only for this process: a read-only bind mount over it
    when running as root (root writes through permission bits), else the permission bits. Skips
    where neither is possible. Undone afterwards."""
    import subprocess

    done: list = []

    def make(directory) -> None:
        if os.geteuid() != 0:
            for path in directory.iterdir():
                path.chmod(0o444)
            directory.chmod(0o555)
            done.append(("chmod", directory))
            return
        if subprocess.run(["mount", "--bind", directory, directory], capture_output=True).returncode != 0:
            pytest.skip("running as root and cannot make a bind mount")
        done.append(("mount", directory))
        if subprocess.run(["mount", "-o", "remount,ro,bind", directory], capture_output=True).returncode != 0:
            pytest.skip("running as root and cannot make a bind mount read-only")

    yield make
    for how, directory in done:
        if how == "mount":
            if subprocess.run(["umount", directory], capture_output=True).returncode != 0:
                subprocess.run(["umount", "--lazy", directory], check=True)
                pytest.fail(f"a file under the read-only mount {directory} was still open (a store not closed)")
        else:
            directory.chmod(0o755)
            for path in directory.iterdir():
                path.chmod(0o644)


def _interpreter_loops_over_scalar_arguments() -> bool:
    """Triton 3.6's interpreter turns a scalar argument into a 1-element array, and a loop such as
    ``range(tl.cdiv(K, BLOCK_K))`` then needs int() of it, which numpy >= 2.4 refuses."""
    import numpy as np
    import triton

    try:
        int(np.array([1]))
    except TypeError:
        return tuple(int(part) for part in triton.__version__.split(".")[:2]) >= (3, 7)
    return True


def pytest_configure(config):
    config.addinivalue_line("markers", "interpreter_loops: runs a kernel that loops over a scalar argument")


def pytest_collection_modifyitems(config, items):
    if _interpreter_loops_over_scalar_arguments():
        return
    skip = pytest.mark.skip(reason="Triton < 3.7's interpreter cannot loop over a scalar argument with numpy >= 2.4")
    for item in items:
        if "interpreter_loops" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def postgres_url():
    """A new, empty PostgreSQL database on the server that ``$TUNEKIT_TEST_POSTGRES`` names
    (``.ci/run`` starts one with ``.ci/postgres``); dropped afterwards. Skips without a server."""
    import uuid

    server = os.environ.get("TUNEKIT_TEST_POSTGRES")
    if not server:
        pytest.skip("no PostgreSQL server: set TUNEKIT_TEST_POSTGRES (.ci/postgres starts one)")
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"tunekit_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(server).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    admin.dispose()
