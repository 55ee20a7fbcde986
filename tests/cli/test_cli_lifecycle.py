"""`pyc new`, `ls`, `kill`: named sessions made, refused, listed, found stale and ended, through the built pyc."""

import json
import os
import signal
import stat
import subprocess
import time

import pexpect
import pytest

import pyctest
from clitest import (EXIT_EXISTS, EXIT_NOSESSION, EXIT_OK, EXIT_USAGE, PYC_CLI, pyc, read_session,
                     runtime_dir, session_file, unique_name, wait_gone)


def test_new_run_kill(sessions):
    name = unique_name()
    p = pyc("new", name, check=EXIT_OK)
    sessions.adopt(name)
    path = session_file(name)
    assert p.stdout.strip() == path
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    info = read_session(name)
    for key in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port", "key", "pid"):
        assert key in info, key
    assert info["signature_scheme"] == "hmac-sha256" and info["transport"] == "tcp" and info["ip"] == "127.0.0.1"
    pid = info["pid"]
    assert pyctest.pid_alive(pid)
    # the kernel is detached: a session (and process group) of its own, not ours
    assert os.getsid(pid) == pid

    # state persists from one `pyc run` to the next
    pyc("run", name, "persist = 20", check=EXIT_OK)
    assert pyc("run", name, "persist + 22", check=EXIT_OK).stdout == "42\n"

    p = pyc("kill", name, check=EXIT_OK)
    assert not os.path.exists(path)
    assert wait_gone(pid), "the kernel outlived pyc kill"
    pyc("run", name, "1", check=EXIT_NOSESSION)


def test_usage_errors():
    assert pyc().returncode == EXIT_USAGE
    assert pyc("frobnicate").returncode == EXIT_USAGE
    for bad in ("Work", "a.b", "", "x" * 81, "a/b", "a b"):
        p = pyc("new", bad, check=EXIT_USAGE)
        assert "pyc:" in p.stderr
    pyc("new", check=EXIT_USAGE)
    pyc("new", "a", "b", check=EXIT_USAGE)
    pyc("run", "a", check=EXIT_USAGE)
    pyc("run", "a", "1", "--timeout", "soon", check=EXIT_USAGE)
    pyc("run", "a", "1", "--timeout=-1", check=EXIT_USAGE)
    pyc("run", "a", "1", "--bogus", check=EXIT_USAGE)
    pyc("run", "a", "1", "--timeout", check=EXIT_USAGE)
    pyc("kill", check=EXIT_USAGE)
    pyc("cp", "a.pkl", "b.pkl", check=EXIT_USAGE)
    pyc("cp", "Work:x", "b.pkl", check=EXIT_USAGE)
    pyc("fork", "a", check=EXIT_USAGE)
    pyc("fork", "a", "b", "b", check=EXIT_USAGE)
    # help is not an error
    assert "pyc run" in pyc("--help", check=EXIT_OK).stdout
    assert "usage: pyc run" in pyc("run", "--help", check=EXIT_OK).stdout
    assert "usage: pyc cp" in pyc("help", "cp", check=EXIT_OK).stdout
    assert pyc("--version", check=EXIT_OK).stdout.startswith("pyc ")


def test_no_such_session():
    name = unique_name("missing")
    for args in (("run", name, "1"), ("status", name), ("vars", name), ("complete", name, "x"), ("int", name),
                 ("kill", name), ("attach", name), ("fork", name, name + "-x"), ("cp", name + ":x", "x.pkl")):
        p = pyc(*args)
        assert p.returncode == EXIT_NOSESSION, (args, p.returncode, p.stderr)
        assert "no session named " + name in p.stderr, (args, p.stderr)


def test_existing_name_is_refused_and_left_alone(sessions):
    name = sessions.new()
    pid = read_session(name)["pid"]
    pyc("run", name, "kept = 'yes'", check=EXIT_OK)
    before = open(session_file(name)).read()
    p = pyc("new", name, check=EXIT_EXISTS)
    assert "already exists" in p.stderr and "--replace" in p.stderr
    assert open(session_file(name)).read() == before
    assert pyctest.pid_alive(pid)
    assert pyc("run", name, "kept", check=EXIT_OK).stdout == "'yes'\n"
    # --replace is the explicit way to discard it
    pyc("new", name, "--replace", check=EXIT_OK)
    new_pid = sessions.adopt(name)
    assert new_pid != pid
    assert wait_gone(pid), "--replace left the old kernel running"
    p = pyc("run", name, "kept", check=1)
    assert "NameError" in p.stderr


def test_concurrent_new_exactly_one_wins(sessions):
    for _ in range(2):
        name = unique_name("race")
        procs = [subprocess.Popen([PYC_CLI, "new", name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=pyctest.child_env()) for _ in range(3)]
        codes = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            codes.append((p.returncode, err))
        sessions.adopt(name)
        assert sorted(c for c, _ in codes) == [EXIT_OK, EXIT_EXISTS, EXIT_EXISTS], codes
        # exactly one kernel was started for the name
        path = session_file(name)
        kernels = [pid for pid in _pids_with_arg(path)]
        assert kernels == [read_session(name)["pid"]], kernels


def _pids_with_arg(arg):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if arg.encode() in argv and pyctest.pid_alive(int(entry)):
            pids.append(int(entry))
    return pids


def test_stale_session_detected_and_cleaned(sessions):
    name = sessions.new()
    pid = read_session(name)["pid"]
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid)
    p = pyc("ls", check=EXIT_OK)
    line = [l for l in p.stdout.splitlines() if l.split()[:1] == [name]]
    assert line and line[0].split()[2] == "stale", p.stdout
    entries = json.loads(pyc("ls", "--json", check=EXIT_OK).stdout)
    assert [e["state"] for e in entries if e["name"] == name] == ["stale"]
    p = pyc("run", name, "1", check=EXIT_NOSESSION)
    assert "stale" in p.stderr
    # `new` cleans it and starts afresh
    pyc("new", name, check=EXIT_OK)
    new_pid = sessions.adopt(name)
    assert new_pid != pid
    assert pyc("run", name, "6 * 7", check=EXIT_OK).stdout == "42\n"
    # and `kill` cleans a stale one too
    os.kill(new_pid, signal.SIGKILL)
    assert wait_gone(new_pid)
    p = pyc("kill", name, check=EXIT_OK)
    assert "stale" in p.stderr
    assert not os.path.exists(session_file(name))


def test_stale_when_the_heartbeat_is_silent(sessions):
    """A pid that is alive but does not answer (stopped kernel) counts as stale; kill ends it."""
    name = sessions.new()
    pid = read_session(name)["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        entries = json.loads(pyc("ls", "--json", check=EXIT_OK).stdout)
        assert [e["state"] for e in entries if e["name"] == name] == ["stale"]
        pyc("kill", name, check=EXIT_OK)
        assert wait_gone(pid)
    finally:
        if pyctest.pid_alive(pid):
            os.kill(pid, signal.SIGCONT)


def test_ls(sessions):
    a = sessions.new()
    b = sessions.new()
    p = pyc("ls", check=EXIT_OK)
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["NAME", "PID", "STATE", "AGE"]
    rows = {l.split()[0]: l.split() for l in lines[1:]}
    for n in (a, b):
        assert rows[n][1] == str(read_session(n)["pid"]) and rows[n][2] == "live", rows
    entries = {e["name"]: e for e in json.loads(pyc("ls", "--json", check=EXIT_OK).stdout)}
    assert entries[a]["state"] == "live" and entries[a]["pid"] == read_session(a)["pid"]
    assert entries[a]["connection_file"] == session_file(a)
    assert 0 <= entries[a]["age"] < 600
    # only pyc-NAME.json files are sessions: other runtime files are ignored
    open(os.path.join(runtime_dir(), "kernel-12345.json"), "w").write("{}")
    open(os.path.join(runtime_dir(), "pyc-Bad.Name.json"), "w").write("{}")
    names = [e["name"] for e in json.loads(pyc("ls", "--json", check=EXIT_OK).stdout)]
    assert "Bad.Name" not in names and "kernel-12345" not in names
    os.unlink(os.path.join(runtime_dir(), "kernel-12345.json"))
    os.unlink(os.path.join(runtime_dir(), "pyc-Bad.Name.json"))


def test_kill_all(sessions):
    a = sessions.new()
    b = sessions.new()
    pids = [read_session(a)["pid"], read_session(b)["pid"]]
    pyc("kill", "--all", check=EXIT_OK)
    assert not os.path.exists(session_file(a)) and not os.path.exists(session_file(b))
    assert all(wait_gone(p) for p in pids)
    assert json.loads(pyc("ls", "--json", check=EXIT_OK).stdout) == []


def test_unreadable_session_file(sessions):
    name = unique_name("broken")
    with open(session_file(name), "w") as f:
        f.write("{not json")
    p = pyc("run", name, "1", check=EXIT_NOSESSION)
    assert "not valid JSON" in p.stderr
    pyc("new", name, check=EXIT_OK)       # replaced
    sessions.adopt(name)
    assert pyc("run", name, "1 + 1", check=EXIT_OK).stdout == "2\n"


def test_kernel_not_found(tmp_path):
    env = pyctest.child_env(PYC_KERNEL=str(tmp_path / "no-such-kernel"))
    p = pyc("new", unique_name(), env=env)
    assert p.returncode == 6 and "cannot run the kernel" in p.stderr


@pytest.mark.timeout(120)
def test_jupyter_console_existing(sessions):
    name = sessions.new()
    pyc("run", name, "from_pyc = 6 * 7", check=EXIT_OK)
    c = pexpect.spawn(pyctest.PYC_PYTHON, ["-m", "jupyter_console", "--existing", "pyc-%s.json" % name,
                                           "--simple-prompt"],
                      encoding="utf-8", env=pyctest.child_env(), timeout=60, dimensions=(40, 200))
    pyctest.register_pid(c.pid)
    try:
        c.expect(r"In \[\d+\]: ")
        time.sleep(1.0)   # jupyter_console's iopub subscription may lag its first prompt (see test_console.py)
        c.sendline("from_pyc + 1")
        c.expect(r"Out\[\d+\]: 43")
        c.expect(r"In \[\d+\]: ")
        c.sendline("from_console = 'hi'")
        c.expect(r"In \[\d+\]: ")
        c.sendeof()
        i = c.expect([r"(?i)really want to exit", pexpect.EOF], timeout=30)
        if i == 0:
            c.sendline("y")
            c.expect(pexpect.EOF, timeout=30)
        c.close()
    finally:
        if c.isalive():
            c.terminate(force=True)
        pyctest.kill_pid(c.pid)
    # the console left the session running, with what it did
    assert pyc("run", name, "from_console", check=EXIT_OK).stdout == "'hi'\n"
