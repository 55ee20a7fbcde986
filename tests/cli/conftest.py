"""pytest fixtures of the `pyc` command-line tests (helpers are in clitest.py)."""

import os
import signal
import time

import pytest

import pyctest
from clitest import Sessions, runtime_dir, unique_name


def pytest_collection_modifyitems(config, items):
    if not pyctest.IS_PYC:
        skip = pytest.mark.skip(reason="the pyc command drives pyc kernels only (PYC_TEST_ARGV is set)")
        for item in items:
            if "/tests/cli/" in str(item.fspath):
                item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def no_process_left():
    """Kernel pids are registered from session files, which misses a kernel whose file was never written or
    was removed (a failed `new`, a fork nobody adopted).  At the end of the run every process that still names
    the tests' runtime dir is a leak: it is killed, and the run fails."""
    root = runtime_dir()
    yield
    left, clean = {}, 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        # A process that is ending (a kernel after `pyc kill`) gets a moment; two clean looks 0.1 s apart
        # also see one that was forked but had not yet exec'd (and shown its command line and environment).
        left = pyctest.processes_naming(root)
        clean = clean + 1 if not left else 0
        if clean == 2:
            return
        time.sleep(0.1)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    pytest.fail("processes of the pyc tests were still alive at the end (killed now):\n" +
                "\n".join("  %d: %s" % (pid, cmd) for pid, cmd in sorted(left.items())))


@pytest.fixture
def sessions():
    s = Sessions()
    yield s
    s.close()


@pytest.fixture(scope="module")
def shared():
    """One session for a module's tests that only run cells in it."""
    s = Sessions()
    name = s.new(unique_name("shared"))
    yield name
    s.close()
