"""`pyc new`, `ls`, `kill`: named sessions made, refused, listed, found stale and ended, through the built pyc."""

import fcntl
import json
import os
import signal
import stat
import subprocess
import time

import pexpect
import pytest

import pyctest
from clitest import (EXIT_CONNECTION, EXIT_ERROR, EXIT_EXISTS, EXIT_INTERRUPTED, EXIT_NOPERM, EXIT_NOSESSION, EXIT_OK,
                     EXIT_TIMEOUT, EXIT_USAGE, PYC_CLI, pids_with_arg, pyc, read_session, runtime_dir, session_file,
                     unique_name, wait_busy, wait_gone)


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


def test_new_takes_the_ports_the_kernel_reports(sessions):
    """`pyc new` starts the kernel with the protocol 5.6 handshake: the kernel binds ports of its own and
    reports them; the session file has those ports, the same as the connection file the kernel wrote for
    itself (kernel-pyc-NAME.json, 0600), and both go with `pyc kill`, also after a SIGKILL."""
    for how in ("kill", "sigkill"):
        name = unique_name()
        pyc("new", name, check=EXIT_OK)
        sessions.adopt(name)
        info = read_session(name)
        own = os.path.join(runtime_dir(), "kernel-pyc-%s.json" % name)
        assert os.path.exists(own), os.listdir(runtime_dir())
        assert stat.S_IMODE(os.stat(own).st_mode) == 0o600
        with open(own) as f:
            kernel_side = json.load(f)
        ports = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
        assert {p: info[p] for p in ports} == {p: kernel_side[p] for p in ports}
        assert "registration_port" not in info
        assert pyc("run", name, "6 * 7", check=EXIT_OK).stdout == "42\n"
        if how == "sigkill":
            os.kill(info["pid"], signal.SIGKILL)
            assert wait_gone(info["pid"])
            assert os.path.exists(own)          # a killed kernel cannot remove it
        pyc("kill", name, check=EXIT_OK)
        assert not os.path.exists(own) and not os.path.exists(session_file(name))


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
        kernels = [pid for pid in pids_with_arg(path)]
        assert kernels == [read_session(name)["pid"]], kernels


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


def _state(name):
    entries = json.loads(pyc("ls", "--json", check=EXIT_OK).stdout)
    return [e["state"] for e in entries if e["name"] == name]


def test_stopped_kernel_is_unresponsive_and_kept(sessions):
    """A kernel whose process is alive but whose heartbeat is silent (SIGSTOP) is "unresponsive", not stale:
    `new` and `fork` refuse the name (exit 4) and leave it alone; after SIGCONT its state is intact.  Only
    `new --replace` and `kill` end it."""
    name = sessions.new()
    pid = read_session(name)["pid"]
    pyc("run", name, "kept = 'state'", check=EXIT_OK)
    before = open(session_file(name)).read()
    os.kill(pid, signal.SIGSTOP)
    try:
        assert _state(name) == ["unresponsive"]
        row = [l.split() for l in pyc("ls", check=EXIT_OK).stdout.splitlines() if l.split()[:1] == [name]]
        assert row and row[0][2] == "unresponsive", row
        p = pyc("new", name, check=EXIT_EXISTS)
        assert "does not answer" in p.stderr and "pyc kill" in p.stderr, p.stderr
        p = pyc("fork", unique_name("parent"), name, check=EXIT_EXISTS)
        assert "already exists" in p.stderr
        assert open(session_file(name)).read() == before
        assert pyctest.pid_alive(pid)
    finally:
        if pyctest.pid_alive(pid):
            os.kill(pid, signal.SIGCONT)
    assert pyc("run", name, "kept", check=EXIT_OK).stdout == "'state'\n"

    # new --replace discards it (SIGKILL at once: a stopped kernel cannot act on a shutdown_request)
    os.kill(pid, signal.SIGSTOP)
    t0 = time.monotonic()
    pyc("new", name, "--replace", check=EXIT_OK)
    assert time.monotonic() - t0 < 4
    assert wait_gone(pid)
    pid = sessions.adopt(name)
    # and kill ends one
    os.kill(pid, signal.SIGSTOP)
    try:
        p = pyc("kill", name, check=EXIT_OK)
        assert "did not answer" in p.stderr
        assert wait_gone(pid)
        assert not os.path.exists(session_file(name))
    finally:
        if pyctest.pid_alive(pid):
            os.kill(pid, signal.SIGCONT)


def _hold_lock(name, note=None):
    """Takes NAME's lock as another pyc would; returns the fd (closing it releases the lock)."""
    fd = os.open(os.path.join(runtime_dir(), "pyc-%s.lock" % name), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    if note is not None:
        os.ftruncate(fd, 0)
        os.write(fd, note.encode())
    return fd


def test_ctrl_c_while_waiting_for_the_lock(sessions):
    """Ctrl-C while another pyc holds the name's lock ends the command at once (exit 130) and does nothing:
    the session it would have replaced is untouched and no kernel was started."""
    name = sessions.new()
    pid = read_session(name)["pid"]
    before = open(session_file(name)).read()
    fd = _hold_lock(name)
    try:
        for args in (("new", name, "--replace"), ("fork", unique_name("parent"), name)):
            p = subprocess.Popen([PYC_CLI] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=pyctest.child_env())
            try:
                time.sleep(0.4)
                assert p.poll() is None, p.communicate()       # waiting for the lock
                p.send_signal(signal.SIGINT)
                out, err = p.communicate(timeout=5)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            assert p.returncode == EXIT_INTERRUPTED, (args, p.returncode, err)
            assert "nothing was done" in err, err
    finally:
        os.close(fd)
    assert open(session_file(name)).read() == before
    assert pyctest.pid_alive(pid)
    assert pids_with_arg(session_file(name)) == [pid]
    pyc("run", name, "1", check=EXIT_OK)


def _wait_stopped(pid, timeout=5.0):
    """Waits until every thread of pid is stopped (state T in /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass
        if states and all(st in ("T", "t") for st in states):
            return
        time.sleep(0.01)


def test_ls_while_another_pyc_holds_the_lock(sessions):
    """`ls` says what the holder of a name's lock does: a kill in progress is "ending", not "starting"."""
    name = sessions.new()
    fd = _hold_lock(name, "kill 1\n")
    try:
        assert _state(name) == ["ending"]
    finally:
        os.close(fd)
    assert _state(name) == ["live"]
    fd = _hold_lock(name, "new 1\n")
    try:
        assert _state(name) == ["live"]          # a `new` that has not replaced it yet
        pid = read_session(name)["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            _wait_stopped(pid)               # every thread, the heartbeat's too (a loaded machine takes a while)
            assert _state(name) == ["starting"]
        finally:
            os.kill(read_session(name)["pid"], signal.SIGCONT)
    finally:
        os.close(fd)


def test_runtime_files_are_never_followed(sessions, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    # a log that is a symbolic link is replaced, not followed (O_TRUNC through it emptied the victim)
    name = unique_name("link")
    log = os.path.join(runtime_dir(), "pyc-%s.log" % name)
    os.symlink(str(victim), log)
    sessions.new(name)
    assert victim.read_text() == "precious\n"
    assert os.path.isfile(log) and not os.path.islink(log)
    # a lock file that is a symbolic link is refused
    other = unique_name("link")
    lock = os.path.join(runtime_dir(), "pyc-%s.lock" % other)
    os.symlink(str(victim), lock)
    try:
        p = pyc("new", other, check=EXIT_NOPERM)
        assert "symbolic link" in p.stderr
        assert not os.path.exists(session_file(other))
    finally:
        os.unlink(lock)
    assert victim.read_text() == "precious\n"
    # a session file that is a FIFO is refused at once (it blocked the open forever), and kill removes it
    fifo = unique_name("fifo")
    os.mkfifo(session_file(fifo))
    p = pyc("run", fifo, "1", timeout=10, check=EXIT_NOSESSION)
    assert "not a regular file" in p.stderr
    assert fifo in pyc("ls", timeout=10, check=EXIT_OK).stdout
    pyc("kill", fifo, timeout=10, check=EXIT_OK)
    assert not os.path.exists(session_file(fifo))
    # a session file that is a symbolic link (here to a live session's) is refused; kill removes the link only
    alias = unique_name("alias")
    os.symlink(session_file(name), session_file(alias))
    p = pyc("run", alias, "1", check=EXIT_NOSESSION)
    assert "symbolic link" in p.stderr
    pyc("kill", alias, check=EXIT_OK)
    assert not os.path.lexists(session_file(alias)) and os.path.exists(session_file(name))
    pyc("run", name, "1", check=EXIT_OK)


def test_unsafe_runtime_dir_is_refused(tmp_path):
    """The runtime dir must be a directory of ours that group and others cannot write: every command is
    refused with EXIT_NOPERM otherwise (help still works), and nothing is made there."""
    rt = tmp_path / "rt"
    rt.mkdir()
    os.chmod(str(rt), 0o777)
    env = pyctest.child_env(JUPYTER_RUNTIME_DIR=str(rt))
    for args in (("ls",), ("run", "x", "1"), ("kill", "--all"), ("new", "x", "--kernel", "/bin/false")):
        p = pyc(*args, env=env, check=EXIT_NOPERM)
        assert "group or others" in p.stderr and p.stderr.count("pyc: ") == 1, (args, p.stderr)
    assert os.listdir(str(rt)) == []
    assert "usage: pyc ls" in pyc("ls", "--help", env=env, check=EXIT_OK).stdout
    os.chmod(str(rt), 0o700)
    link = tmp_path / "rt-link"
    os.symlink(str(rt), str(link))
    p = pyc("ls", env=pyctest.child_env(JUPYTER_RUNTIME_DIR=str(link)), check=EXIT_NOPERM)
    assert "symbolic link" in p.stderr
    if os.geteuid() == 0:
        os.chown(str(rt), 65534, 65534)
        p = pyc("ls", env=env, check=EXIT_NOPERM)
        assert "belongs to uid 65534" in p.stderr
        os.chown(str(rt), 0, 0)
    pyc("ls", env=env, check=EXIT_OK)


def test_ls(sessions):
    a = sessions.new()
    b = sessions.new()
    p = pyc("ls", check=EXIT_OK)
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["NAME", "PID", "STATE", "AGE", "CHECKPOINT"]
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
    assert p.returncode == EXIT_CONNECTION and "cannot run the kernel" in p.stderr


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


def test_kernel_inherits_no_spare_descriptor(sessions):
    """The kernel gets /dev/null as fd 0 and nothing else of it: the descriptor pyc opened is not left open."""
    name = sessions.new()
    pid = read_session(name)["pid"]
    nulls = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        # The kernel opens and closes descriptors of its own while it runs (the event log, the open-files
        # reserve), so one listed a moment ago may be gone: such a descriptor is not an inherited one.
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except FileNotFoundError:
            continue
        if target == "/dev/null":
            nulls.append(int(fd))
    assert sorted(nulls) == [0], nulls


def _kernel_script(tmp_path, body):
    path = tmp_path / "fake-kernel"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_failed_new_and_its_log(tmp_path):
    """A failed `new` keeps pyc-NAME.log only when the kernel wrote its error there (and names it); `kill NAME`
    removes such a log; an empty one, or one of an interrupted `new`, is removed at once."""
    name = unique_name("fail")
    log = os.path.join(runtime_dir(), "pyc-%s.log" % name)
    p = pyc("new", name, "--kernel", _kernel_script(tmp_path, "echo 'kernel boom' >&2\nexit 3\n"),
            check=EXIT_CONNECTION)
    assert "kernel boom" in p.stderr and log in p.stderr, p.stderr
    assert open(log).read() == "kernel boom\n"
    assert not os.path.exists(session_file(name))
    assert name not in [e["name"] for e in json.loads(pyc("ls", "--json", check=EXIT_OK).stdout)]
    p = pyc("kill", name, check=EXIT_OK)
    assert "leftover log" in p.stderr
    assert not os.path.exists(log)
    pyc("kill", name, check=EXIT_NOSESSION)
    # kill --all finds a leftover log too
    pyc("new", name, "--kernel", _kernel_script(tmp_path, "echo 'kernel boom' >&2\nexit 3\n"), check=EXIT_CONNECTION)
    assert os.path.exists(log)
    pyc("kill", "--all", check=EXIT_OK)
    assert not os.path.exists(log)
    # a kernel that says nothing leaves no log
    pyc("new", name, "--kernel", "/bin/false", check=EXIT_CONNECTION)
    assert not os.path.exists(log)
    # an interrupted new: no log, no session file, no kernel
    sleeper = _kernel_script(tmp_path, "exec %s -c 'import time; time.sleep(60)' \"$@\"\n" % pyctest.PYC_PYTHON)
    p = subprocess.Popen([PYC_CLI, "new", name, "--kernel", sleeper], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=pyctest.child_env())
    try:
        deadline = time.monotonic() + 10
        while not pids_with_arg(session_file(name)) and time.monotonic() < deadline:
            time.sleep(0.02)
        kernels = pids_with_arg(session_file(name))
        for pid in kernels:
            pyctest.register_pid(pid)
        assert kernels, "the fake kernel never started"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == EXIT_INTERRUPTED, (p.returncode, err)
    assert all(wait_gone(pid) for pid in kernels)
    assert not os.path.exists(log) and not os.path.exists(session_file(name))


def test_new_in_a_python_environment(sessions, tmp_path):
    """`pyc new` from an activated virtual environment runs the kernel in it (pyc status says which), --python
    chooses one, --no-env none, and --kernel may name a kernelspec (its program and env)."""
    env = tmp_path / "env"
    p = subprocess.run([pyctest.PYC_PYTHON, "-m", "venv", "--without-pip", str(env)], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        pytest.skip("python3 -m venv does not work here")
    active = pyctest.child_env(VIRTUAL_ENV=str(env), PATH="%s/bin:%s" % (env, os.environ.get("PATH", "")))
    name = unique_name()
    pyc("new", name, env=active, check=EXIT_OK)
    sessions.adopt(name)
    assert pyc("run", name, "import sys; print(sys.prefix)", check=EXIT_OK).stdout.strip() == str(env)
    status = json.loads(pyc("status", name, check=EXIT_OK).stdout)
    assert status["environment"]["prefix"] == str(env) and status["environment"]["venv"] is True
    pyc("kill", name, check=EXIT_OK)

    name = unique_name()
    pyc("new", name, "--no-env", env=active, check=EXIT_OK)
    sessions.adopt(name)
    assert pyc("run", name, "import sys; print(sys.prefix == sys.base_prefix)", check=EXIT_OK).stdout == "True\n"
    pyc("kill", name, check=EXIT_OK)

    name = unique_name()
    pyc("new", name, "--python", str(env / "bin" / "python3"), check=EXIT_OK)
    sessions.adopt(name)
    assert pyc("run", name, "import sys; print(sys.prefix)", check=EXIT_OK).stdout.strip() == str(env)
    pyc("kill", name, check=EXIT_OK)

    # a kernelspec by name: its program and its env (here, the environment) are what `new` starts
    kdir = os.path.join(os.environ["JUPYTER_DATA_DIR"], "kernels", "pyc-in-env")
    os.makedirs(kdir, exist_ok=True)
    with open(os.path.join(kdir, "kernel.json"), "w") as f:
        json.dump({"argv": [pyctest.PYC_KERNEL, "-f", "{connection_file}"], "display_name": "x", "language": "python",
                   "env": {"PYC_PYTHON_EXE": str(env / "bin" / "python3")}}, f)
    name = unique_name()
    pyc("new", name, "--kernel", "pyc-in-env", check=EXIT_OK)
    sessions.adopt(name)
    assert pyc("run", name, "import sys; print(sys.prefix)", check=EXIT_OK).stdout.strip() == str(env)
    pyc("kill", name, check=EXIT_OK)
    pyc("new", unique_name(), "--kernel", "no-such-kernelspec", check=EXIT_CONNECTION)


# ---- limits of a session (pyc new --idle ... --replay) -------------------------------------------------------

def _limits(name):
    return json.loads(pyc("status", name, check=EXIT_OK).stdout)["limits"]


def test_new_limit_flags_reach_the_kernel(sessions):
    name = sessions.new(None, "--cell-timeout", "1", "--output-limit", "1K", "--memory", "2G", "--lifetime", "1h",
                        "--idle", "30m")
    st = json.loads(pyc("status", name, check=EXIT_OK).stdout)
    lim = st["limits"]
    assert (lim["idle_timeout"], lim["lifetime"], lim["cell_timeout"], lim["output_limit"], lim["memory_limit"]) == \
        (1800, 3600, 1, 1024, 2 << 30)
    # the checkpoint the kernel writes, named after the session
    assert st["checkpoint"].endswith("/pyc-%s.py" % name) and os.path.exists(st["checkpoint"])
    # --cell-timeout stops a sleeping cell (CellTimeout, exit 5), and the session goes on
    t = time.monotonic()
    p = pyc("run", name, "import time\ntime.sleep(30)", timeout=60)
    assert p.returncode == EXIT_TIMEOUT and "CellTimeout" in p.stderr, (p.returncode, p.stderr)
    assert time.monotonic() - t < 20
    # --output-limit cuts a cell's output at 1 KiB
    p = pyc("run", name, "print('x' * 5000)", check=EXIT_OK)
    assert len(p.stdout) + len(p.stderr) == 1024 and "dropped" in p.stderr   # the notice within the cap
    assert pyc("run", name, "6 * 7", check=EXIT_OK).stdout == "42\n"


def test_new_cpu_and_open_file_limits(sessions):
    """--cell-cpu stops a busy cell (CellCPUTimeout, exit EXIT_TIMEOUT: a limit reached, the session intact) and
    not a sleeping one; --open-files gives EMFILE, and the session answers a new pyc run after it."""
    name = sessions.new(None, "--cell-cpu", "1", "--open-files", "40")
    lim = _limits(name)
    assert lim["cell_cpu"] == 1 and lim["open_files"] == 40
    assert pyc("run", name, "import time\ntime.sleep(2)\n'slept'", check=EXIT_OK).stdout == "'slept'\n"
    t = time.monotonic()
    p = pyc("run", name, "import time\nt = time.process_time()\nwhile time.process_time() - t < 20: pass",
            timeout=60)
    assert p.returncode == EXIT_TIMEOUT and "CellCPUTimeout" in p.stderr, (p.returncode, p.stderr)
    assert time.monotonic() - t < 18
    p = pyc("run", name, "--json", "while True: pass", timeout=60, check=EXIT_TIMEOUT)
    reply, outcome = [json.loads(x) for x in p.stdout.splitlines()[-2:]]
    md = reply["metadata"]["pyc"]
    assert md["outcome"] == "timeout" and md["limit"] == "cpu" and md["state"] == "intact"
    assert outcome["outcome"] == "timeout" and outcome["by"] == "pyc", outcome
    p = pyc("run", name, "held = []\nwhile len(held) < 10**5: held.append(open('/dev/null'))", check=EXIT_ERROR)
    assert "Too many open files" in p.stderr
    # a new connection, a cell that takes longer than a second (the heartbeat too), and status, all answered
    assert int(pyc("run", name, "import time\ntime.sleep(1.5)\nlen(held)", check=EXIT_OK).stdout) >= 40
    assert json.loads(pyc("status", name, check=EXIT_OK).stdout)["usage"]["pyc"]["open_files"] >= 40
    pyc("run", name, "for f in held: f.close()\ndel held", check=EXIT_OK)
    assert pyc("run", name, "len([open('/dev/null') for _ in range(30)])", check=EXIT_OK).stdout == "30\n"
    # off by default, and with 0
    lim = _limits(sessions.new(None, "--cell-cpu", "0", "--open-files", "0"))
    assert lim["cell_cpu"] is None and lim["open_files"] is None


def test_a_cell_that_took_every_file_does_not_keep_clients_out(sessions):
    """A cell that opened files up to the session's limit and goes on running: the kernel gives its reserve of
    descriptors back while the cell runs, so that a new `pyc status` connects and `pyc int` stops the cell."""
    name = sessions.new(None, "--open-files", "20")
    code = ("held = []\ntry:\n    while True: held.append(open('/dev/null'))\nexcept OSError: pass\n"
            "import time\ntime.sleep(60)")
    cell = pyc("fire", name, code, check=EXIT_OK).stdout.strip()
    # the cell's loop takes every descriptor within milliseconds of starting; the guard looks every 200 ms
    assert wait_busy(name, timeout=20)
    time.sleep(1.0)
    for _ in range(3):                       # new connections each time, while the cell holds every file
        assert json.loads(pyc("status", name, check=EXIT_OK).stdout)["state"] == "busy"
    pyc("int", name, check=EXIT_OK)
    p = pyc("poll", name, cell, "--wait=20", check=EXIT_ERROR)
    assert "KeyboardInterrupt" in p.stderr, p.stderr
    pyc("run", name, "del held", check=EXIT_OK)


def test_new_idle_timeout_default_and_overrides(sessions):
    """Without --idle a session ends after a day without a request, unless PYC_IDLE_TIMEOUT (ours, or the
    kernelspec's env) says otherwise; --idle 0 means never."""
    assert _limits(sessions.new())["idle_timeout"] == 86400
    name = unique_name()
    pyc("new", name, check=EXIT_OK, env=pyctest.child_env(PYC_IDLE_TIMEOUT="1h"))
    sessions.adopt(name)
    assert _limits(name)["idle_timeout"] == 3600
    lim = _limits(sessions.new(None, "--idle", "0"))
    assert lim["idle_timeout"] is None and lim["memory_limit"] is None


def test_new_sessions_are_bounded_by_default(sessions):
    """A `pyc new` session has a lifetime (a week), a deadline per cell (an hour) and an output cap (the
    kernel's 32 MiB) unless told otherwise; each flag, or its PYC_* variable, overrides it, 0 turns it off."""
    lim = _limits(sessions.new())
    assert lim["lifetime"] == 7 * 86400 and lim["cell_timeout"] == 3600, lim
    assert lim["output_limit"] == 32 << 20 and lim["idle_timeout"] == 86400, lim
    lim = _limits(sessions.new(None, "--lifetime", "0", "--cell-timeout", "0", "--output-limit", "0"))
    assert lim["lifetime"] is None and lim["cell_timeout"] is None and lim["output_limit"] is None, lim
    name = unique_name()
    pyc("new", name, check=EXIT_OK, env=pyctest.child_env(PYC_LIFETIME="2h", PYC_CELL_TIMEOUT="90s"))
    sessions.adopt(name)
    lim = _limits(name)
    assert lim["lifetime"] == 7200 and lim["cell_timeout"] == 90, lim


def test_new_idle_ends_an_abandoned_session(sessions):
    name = sessions.new(None, "--idle", "2")
    pid = read_session(name)["pid"]
    pyc("run", name, "x = 1", check=EXIT_OK)
    t = time.monotonic()
    assert wait_gone(pid, 20), "the kernel outlived its idle timeout"
    assert 1.5 < time.monotonic() - t < 20
    assert _state(name) == ["stale"]
    pyc("run", name, "x", check=EXIT_NOSESSION)


def test_new_bad_limit_values_are_usage_errors(tmp_path):
    name = unique_name()
    for flags in (["--idle", "soon"], ["--idle", "-1"], ["--lifetime", "5 parsecs"], ["--cell-timeout", ""],
                  ["--output-limit", "lots"], ["--memory", "1X"], ["--cell-cpu", "soon"], ["--cell-cpu", "-2"],
                  ["--open-files", "1.5"], ["--open-files", "1K"], ["--open-files", "2000000000"],
                  ["--replay", str(tmp_path / "none.py")],
                  ["--replay", str(tmp_path)]):
        p = pyc("new", name, *flags, check=EXIT_USAGE)
        assert p.stderr.startswith("pyc: new: %s" % flags[0]), p.stderr
        assert not os.path.exists(session_file(name))


def test_new_replay_of_a_checkpoint(sessions, tmp_path):
    a = sessions.new()
    flag = tmp_path / "flag"
    flag.write_text("")
    pyc("run", a, "rp = 41", check=EXIT_OK)
    pyc("run", a, "rp += 1", check=EXIT_OK)
    checkpoint = json.loads(pyc("status", a, check=EXIT_OK).stdout)["checkpoint"]
    b = sessions.new(None, "--replay", checkpoint)
    assert pyc("run", b, "rp", check=EXIT_OK).stdout == "42\n"
    # a replay that stops at a failing cell starts the session anyway, and says so
    pyc("run", a, "open(%r).close()\nrp = 0" % str(flag), check=EXIT_OK)
    flag.unlink()
    c = unique_name()
    p = pyc("new", c, "--replay", checkpoint, check=EXIT_OK)
    sessions.adopt(c)
    assert "stopped at cell 3 of 3" in p.stderr and "FileNotFoundError" in p.stderr, p.stderr
    assert pyc("run", c, "rp", check=EXIT_OK).stdout == "42\n"
