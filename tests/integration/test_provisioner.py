"""pyc_client's handshake provisioner (the launcher side of the protocol 5.6 startup handshake) through
jupyter_client's own KernelManager, selected by a kernelspec's metadata.kernel_provisioner: the kernel is
started on a registration file, reports its ports to the provisioner's ROUTER, and the manager and its
clients use them; a restart reports on the same registration socket; a kernel that exits before reporting,
or never reports, is an error of start_kernel, not a hang.  (Through a real jupyter_server: the
@jupyterlab/services test, tests/clients.)

pyc only.
"""

import glob
import json
import os
import sys

import pytest
from jupyter_client.manager import KernelManager

import pyctest
from pyctest import TIMEOUT, execute, pyc_only

pytestmark = pyc_only


def cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


@pytest.fixture
def km():
    m = KernelManager(kernel_name="pyc-handshake")
    yield m
    if m.has_kernel:
        m.shutdown_kernel(now=True)
    for pid in pids:
        pyctest.kill_pid(pid)


pids = []


def start(m, **kw):
    try:
        m.start_kernel(stderr=open(pyctest.new_log_path("provisioner-kernel"), "wb"), **kw)
    finally:
        proc = getattr(m.provisioner, "process", None)
        if proc is not None:
            pids.append(proc.pid)
            pyctest.register_pid(proc.pid)


def test_start_cell_restart_shutdown(km):
    from pyc_client._provisioner import HandshakeProvisioner

    start(km)
    assert isinstance(km.provisioner, HandshakeProvisioner)
    argv = cmdline(km.provisioner.process.pid)
    reg_path = argv[argv.index("-f") + 1]
    assert reg_path.endswith("-registration.json"), argv
    with open(reg_path) as f:
        reg = json.load(f)
    assert reg["kernel_id"] == km.kernel_id and reg["registration_port"] == km.provisioner._port
    info = km.get_connection_info()
    assert all(info[p] > 0 for p in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"))
    with open(km.connection_file) as f:          # the kernel's own file, where jupyter_client keeps it
        written = json.load(f)
    assert written["shell_port"] == info["shell_port"]

    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=TIMEOUT)
    reply, msgs = execute(kc, "import os; print(os.getpid())")
    assert reply["content"]["status"] == "ok"
    assert pyctest.stream_text(msgs).strip() == str(km.provisioner.process.pid)
    port = km.provisioner._port
    old_pid = km.provisioner.process.pid
    kc.stop_channels()

    km.restart_kernel(now=False)
    pids.append(km.provisioner.process.pid)
    pyctest.register_pid(km.provisioner.process.pid)
    assert km.provisioner.process.pid != old_pid
    assert km.provisioner._port == port              # the same registration socket
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=TIMEOUT)
    reply, msgs = execute(kc, "1 + 1")
    assert reply["content"]["status"] == "ok"
    kc.stop_channels()

    runtime = os.path.dirname(km.connection_file)
    km.shutdown_kernel()
    assert not glob.glob(os.path.join(runtime, "kernel-%s*" % km.kernel_id)), os.listdir(runtime)


def test_a_kernel_that_exits_before_reporting(km, tmp_path):
    # A kernel command that is not pyc-kernel: the start fails at once with the exit status, not a hang.
    km.kernel_spec.argv = [sys.executable, "-c", "import sys; sys.exit(3)", "{connection_file}"]
    with pytest.raises(RuntimeError, match="exited"):
        start(km)


def test_a_kernel_that_never_reports(km):
    # registration_timeout set as a kernelspec would set it (kernel_provisioner.config)
    km.kernel_spec.argv = [sys.executable, "-c", "import time; time.sleep(30)", "{connection_file}"]
    km.kernel_spec.metadata["kernel_provisioner"]["config"] = {"registration_timeout": 1.0}
    with pytest.raises(RuntimeError, match="did not report"):
        start(km)


def _port_grabber():
    """bench/bench_handshake.py's helper process body: takes free ephemeral ports, holding each for 50 ms."""
    sys.path.insert(0, os.path.join(pyctest.PYC_SRCDIR, "bench"))
    try:
        from bench_handshake import grabber
    finally:
        sys.path.pop(0)
    return grabber


@pytest.mark.slow
def test_start_storm_with_the_handshake():
    """20 kernels started at once through the provisioner while another process takes free ports: every one
    starts and answers (bench/bench_handshake.py compares with the classic start, which loses some)."""
    import multiprocessing
    import threading

    stop = multiprocessing.Event()
    taker = multiprocessing.Process(target=_port_grabber(), args=(stop,))
    taker.start()
    pyctest.register_pid(taker.pid)
    managers = [KernelManager(kernel_name="pyc-handshake") for _ in range(20)]
    errors = []

    def one(m):
        try:
            start(m)
            kc = m.client()
            kc.start_channels()
            try:
                kc.wait_for_ready(timeout=60)
            finally:
                kc.stop_channels()
        except Exception as e:  # noqa: BLE001 -- every failure is reported below
            errors.append("%s: %s" % (type(e).__name__, e))

    threads = [threading.Thread(target=one, args=(m,)) for m in managers]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        stop.set()
        taker.join(10)
        for m in managers:
            if m.has_kernel:
                m.shutdown_kernel(now=True)
        for pid in pids:
            pyctest.kill_pid(pid)
    assert not errors, errors
