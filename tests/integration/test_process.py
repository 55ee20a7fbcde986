"""The pyc-kernel process: bad connection files, parent death (JPY_PARENT_PID), ipc transport."""

import json
import os
import subprocess
import time

import pytest

from pyctest import (
    PYC_KERNEL,
    Kernel,
    assert_alive,
    child_env,
    connect_client,
    execute,
    ipc_dir,
    kernel_argv,
    kill_pid,
    new_log_path,
    pyc_only,
    register_pid,
    result_text,
    stream_text,
    wait_exit,
    write_connection_file,
)


@pytest.fixture
def spawn():
    """Start processes; every one is killed by pid at teardown if still alive."""
    procs = []

    def _spawn(argv, env=None, **kw):
        log = new_log_path("proc")
        fh = open(log, "wb")
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", fh)
        kw.setdefault("stderr", fh)
        p = subprocess.Popen(argv, env=env if env is not None else child_env(), **kw)
        p.log_path = log
        p.log_fh = fh
        register_pid(p.pid)
        procs.append(p)
        return p

    yield _spawn
    for p in procs:
        kill_pid(p.pid)
        try:
            p.wait(timeout=5)
        except Exception:
            pass
        p.log_fh.close()


def read_log(p):
    p.log_fh.flush()
    with open(p.log_path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def run_bad(spawn, argv):
    p = spawn(argv, stdout=subprocess.DEVNULL)
    code = wait_exit(p, 15)
    assert code is not None, "pyc-kernel did not exit on a bad connection file"
    lines = [ln for ln in read_log(p).splitlines() if ln.strip()]
    return code, lines


def assert_one_clear_line(lines, *words):
    assert len(lines) == 1, "expected one line on stderr, got %r" % lines
    line = lines[0]
    assert line.startswith("pyc-kernel: "), line
    for w in words:
        assert w.lower() in line.lower(), "%r not in %r" % (w, line)


@pyc_only
def test_nonexistent_connection_file(spawn, tmp_path):
    # A path inside this test's own temporary dir: ipykernel, when the suite is calibrated against it,
    # creates a missing connection file, so a fixed path would exist on the second run.
    missing = str(tmp_path / "missing" / "nonexistent.json")
    code, lines = run_bad(spawn, [PYC_KERNEL, "-f", missing])
    assert code != 0
    assert code > 0, "killed by signal %d" % -code
    assert_one_clear_line(lines, "nonexistent.json")


@pyc_only
@pytest.mark.parametrize(
    "text",
    ["{not json", "", "[]", '{"shell_port": "x"}'],
    ids=["invalid-json", "empty", "not-an-object", "bad-port"],
)
def test_invalid_connection_file(spawn, tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    code, lines = run_bad(spawn, [PYC_KERNEL, "-f", str(path)])
    assert 0 < code
    assert_one_clear_line(lines, "bad.json")


@pyc_only
def test_unknown_signature_scheme(spawn, tmp_path):
    path, info = write_connection_file()
    with open(path) as f:
        data = json.load(f)
    data["signature_scheme"] = "hmac-nope"
    with open(path, "w") as f:
        json.dump(data, f)
    code, lines = run_bad(spawn, [PYC_KERNEL, "-f", path])
    assert 0 < code
    assert_one_clear_line(lines, "hmac-nope")


@pyc_only
def test_dies_with_parent(spawn):
    """With JPY_PARENT_PID set, the kernel exits by itself soon after that process dies."""
    parent = spawn(["sleep", "1000"])
    path, info = write_connection_file()
    env = child_env(JPY_PARENT_PID=str(parent.pid))
    kernel = spawn(kernel_argv(path), env=env)
    # it is up: a client gets kernel_info
    kc = connect_client(path, kernel)
    try:
        assert_alive(kc)
    finally:
        kc.stop_channels()
    assert kernel.poll() is None
    t0 = time.monotonic()
    kill_pid(parent.pid)
    parent.wait(timeout=5)
    code = wait_exit(kernel, 10)
    assert code is not None, "kernel still alive 10 s after its parent (JPY_PARENT_PID) died"
    # At once: the kernel watches a pidfd of its parent (where pidfd_open fails, it looks every 30 s).
    assert time.monotonic() - t0 < 5


@pyc_only
def test_stderr_lines_are_prefixed(fresh_kernel):
    """Whatever pyc logs on its stderr is one line per event, each starting with "pyc-kernel: "."""
    fresh_kernel.require_pyc()
    execute(fresh_kernel.kc, "pass")
    fresh_kernel.shutdown(now=False)
    for line in fresh_kernel.stderr_lines():
        if line.strip():
            assert line.startswith("pyc-kernel: "), line


def test_ipc_transport():
    d = ipc_dir()
    k = Kernel("pyc", transport="ipc", ip=os.path.join(d, "k"))
    try:
        info = k.km.get_connection_info()
        assert info["transport"] == "ipc"
        names = set(os.listdir(d))
        for port in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"):
            assert "k-%d" % info[port] in names, (port, names)
        reply, msgs = execute(k.kc, "print(2 + 2)")
        assert reply["content"]["status"] == "ok"
        assert stream_text(msgs) == "4\n"
        assert k.kc.is_alive()
    finally:
        k.shutdown(now=False)


def test_direct_launch_with_connection_file(spawn):
    """The kernelspec argv with a connection file we wrote: the kernel binds the ports in it."""
    path, info = write_connection_file()
    kernel = spawn(kernel_argv(path))
    kc = connect_client(path, kernel)
    try:
        reply, msgs = execute(kc, "import os\nos.getpid()")
        assert result_text(msgs) == str(kernel.pid)
        kc.shutdown()
        assert wait_exit(kernel, 10) == 0
    finally:
        kc.stop_channels()
