"""pytest configuration shared by tests/integration and tests/clients.

Environment (exported by `make check` through tests/pytest.sh):
  PYC_KERNEL    absolute path of the built pyc-kernel
  PYC_PYTHON    the Python that runs pytest and the Jupyter clients
  PYC_SRCDIR    the source dir (for examples/)
  PYC_TEST_ARGV optional JSON argv list that replaces pyc-kernel in the kernelspecs (calibration against
                ipykernel); pyc-only tests then skip.
"""

import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyctest  # noqa: E402
import testports  # noqa: E402


def _cache_rewritten_test_modules():
    """pytest rewrites the asserts of every test module in every pytest-xdist worker of every run (2 s of CPU
    each here, a tenth of the test command on two cores) unless it may keep the result as bytecode, which
    PYTHONDONTWRITEBYTECODE (tests/pytest.sh) forbids so that no __pycache__ lands in the source tree.  The
    rewritten test modules, and only they, are kept under the build dir instead (PYC_BUILDDIR/tests/
    pytest-cache): pytest's rewriter is given a view of sys in which writing is allowed and pycache_prefix
    points there.  pytest checks each cached module against its source's time and size."""
    builddir = os.environ.get("PYC_BUILDDIR", "")
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    if not os.path.isdir(builddir) or getattr(rewrite, "sys", None) is not sys:
        return
    prefix = os.path.join(os.path.abspath(builddir), "tests", "pytest-cache")

    class RewriterSys:
        dont_write_bytecode = False
        pycache_prefix = prefix

        def __getattr__(self, name):
            return getattr(sys, name)

    rewrite.sys = RewriterSys()


_cache_rewritten_test_modules()
# Before any test module imports jupyter_client's write_connection_file by name.
testports.install()


def pytest_configure(config):
    config.addinivalue_line("markers", "pyc_only: behaviour that only pyc promises (skips for other kernels)")
    config.addinivalue_line("markers", "slow: load tests, whole notebooks and soak tests: make check-slow only")
    try:
        pyctest.setup_environment()
    except (RuntimeError, ValueError) as e:
        raise pytest.UsageError(str(e))


#: The modules that take longest (seconds of test time, measured on 2 cores with 6 workers: test_limits 59,
#: test_hardening 35, test_pickle 31, ... down to test_agent_server 17), run first.  pytest-xdist hands the
#: modules (--dist loadfile) to its workers in collection order, so the longest start first and the short ones
#: fill in at the end, instead of one long module starting last and keeping the run waiting for it alone.
LONGEST_MODULES = ("test_limits.py", "test_hardening.py", "test_pickle.py", "test_cli_waits.py",
                   "test_timetravel.py", "test_subshells.py", "test_cli_lifecycle.py", "test_gateway_launch.py",
                   "test_environments.py", "test_nbconvert.py", "test_notebook_browser.py", "test_idle.py",
                   "test_interrupt.py", "test_agent_server.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_MODULES)}
    items.sort(key=lambda item: rank.get(os.path.basename(str(item.fspath)), len(rank)))   # stable: order kept


def pytest_report_header(config):
    return [
        "kernel under test: %s" % ("pyc" if pyctest.IS_PYC else "override (PYC_TEST_ARGV)"),
        "kernel argv: %s" % pyctest.kernel_argv_template(),
        "isolated jupyter dirs: %s" % pyctest.env_root(),
    ]


def pytest_sessionfinish(session, exitstatus):
    stray = [pid for pid in sorted(pyctest.STARTED_PIDS) if pyctest.pid_alive(pid)]
    for pid in stray:
        pyctest.kill_pid(pid)
    if stray:
        sys.stderr.write("\nERROR: processes started by the tests were still alive at the end: %s\n" % stray)
        session.exitstatus = 1
    # The temp Jupyter dirs and kernel logs (stderr of every kernel) are kept when something failed.
    if session.exitstatus == 0:
        shutil.rmtree(pyctest.env_root(), ignore_errors=True)
    else:
        sys.stderr.write("\nkernel logs and Jupyter dirs of this run: %s\n" % pyctest.env_root())


class _ModuleKernel:
    """A module's shared kernel, started again if a test left it dead."""

    def __init__(self, name):
        self.name = name
        self.kernel = None
        self.old = []
        self.failed = None

    def get(self):
        if self.failed is not None:
            # one failed start per module is enough: do not wait for the kernel again in every test
            pytest.fail("the module's kernel did not start: %s" % self.failed)
        if self.kernel is not None and not self.kernel.is_alive():
            self.old.append(self.kernel)
            self.kernel.shutdown(now=True)
            self.kernel = None
        if self.kernel is None:
            try:
                self.kernel = pyctest.Kernel(self.name)
            except Exception as e:
                self.failed = "%s: %s" % (type(e).__name__, e)
                raise
        return self.kernel

    def close(self):
        if self.kernel is not None:
            self.kernel.shutdown(now=False)
        for k in self.old:
            k.shutdown(now=True)


@pytest.fixture(scope="module")
def _module_kernel():
    holder = _ModuleKernel("pyc")
    yield holder
    holder.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        # failed, or failed as expected (xfail)
        item.pyc_call_failed = rep.failed or hasattr(rep, "wasxfail")


@pytest.fixture
def kernel(request, _module_kernel):
    """The module's shared pyc kernel (a pyctest.Kernel): km, kc, stderr()...  A test that failed (or failed
    as expected) leaves it in a state nobody knows -- a cell that never ended, say, whose wait would fail every
    later test of the module -- so the next test gets another one."""
    k = _module_kernel.get()
    pyctest.drain(k.kc, "iopub", quiet=0.01)
    pyctest.drain(k.kc, "shell", quiet=0.01)     # a new kernel's: replies to wait_for_ready's extra kernel_infos
    yield k
    if getattr(request.node, "pyc_call_failed", False) and _module_kernel.kernel is k:
        _module_kernel.kernel = None
        k.shutdown(now=True)


@pytest.fixture
def kc(kernel):
    return kernel.kc


@pytest.fixture
def fresh_kernel():
    """A kernel of its own for a test that kills, restarts or interrupts it."""
    k = pyctest.Kernel("pyc")
    yield k
    k.shutdown(now=True)


@pytest.fixture
def msg_kernel():
    """A kernel started from the `pyc-msg` kernelspec (interrupt_mode "message")."""
    k = pyctest.Kernel("pyc-msg")
    yield k
    k.shutdown(now=True)
