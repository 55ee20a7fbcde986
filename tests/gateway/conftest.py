"""pytest fixtures of the `pyc-kernel gateway-launch` tests: a fake gateway, launchers that are always ended by
pid, and a check at the end of the run that no process of these tests is left (helpers are in fakegateway.py).

The parent conftest (tests/conftest.py) has already pointed HOME and the Jupyter dirs at fresh temp dirs; every
launcher gets them, plus a TMPDIR of its own under the test's tmp_path.
"""

import time

import pytest

# The helpers' assertions (fakegateway.receive, run_one_plus_one) explain themselves like the tests' own.
pytest.register_assert_rewrite("fakegateway")

import fakegateway  # noqa: E402
import pyctest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if not pyctest.IS_PYC:
        skip = pytest.mark.skip(reason="gateway-launch is a pyc-kernel subcommand (PYC_TEST_ARGV is set)")
        for item in items:
            if "/tests/gateway/" in str(item.fspath):
                item.add_marker(skip)


@pytest.fixture
def gateway():
    """A fake gateway listening on 127.0.0.1 with the session's RSA key."""
    g = fakegateway.FakeGateway()
    yield g
    g.close()


@pytest.fixture
def launch(tmp_path):
    """launch(args, env=None, prefix=None) starts `pyc-kernel gateway-launch args` (a fakegateway.Launcher);
    each launcher, and the kernel it reported, is ended by pid when the test ends."""
    started = []

    def start(args, env=None, prefix=None):
        base = tmp_path / ("launcher-%d" % len(started))
        base.mkdir()
        launcher = fakegateway.Launcher(args, base, env=env, prefix=prefix)
        started.append(launcher)
        return launcher

    yield start
    for launcher in started:
        launcher.stop()


@pytest.fixture(scope="session", autouse=True)
def no_kernel_left(tmp_path_factory):
    """At the end of the run no process may name the tests' temp dirs (every launcher's TMPDIR is there, and
    every kernel it starts has that TMPDIR in its environment): one that does is killed and fails the run."""
    root = str(tmp_path_factory.getbasetemp()) + "/"  # the slash: pytest-1 is not pytest-10
    yield
    deadline = time.monotonic() + 5
    left = pyctest.processes_naming(root)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = pyctest.processes_naming(root)
    for pid in left:
        fakegateway.sigkill(pid)
    if left:
        pytest.fail("processes of the gateway tests were still alive at the end (killed now):\n" +
                    "\n".join("  %d: %s" % (pid, cmd) for pid, cmd in sorted(left.items())))


@pytest.fixture
def connect():
    """connect(info, ip) -> a ready BlockingKernelClient on the decoded connection info with its ip replaced,
    as a gateway does (fakegateway.kernel_client); its channels are stopped when the test ends."""
    made = []

    def make(info, ip):
        kc = fakegateway.kernel_client(info, ip)
        made.append(kc)
        return kc

    yield make
    for kc in made:
        try:
            kc.stop_channels()
        except Exception:
            pass
