"""No `pyc` command waits forever, and its exit code says what survived (issue 12).

A kernel stopped with SIGSTOP (its process lives, nothing in it runs) ends every wait through the client's
heartbeat watch with exit 6; a session file whose key is not the kernel's fails within seconds, exit 6; a
kernel that ends during the cell (its lifetime, a cell stuck past its deadline, its process dying) is exit 7;
a cell stopped at its deadline is exit 5 with the session intact; SystemExit(n) in `pyc run` exits n.
PYC_CLI_HB_MS=1000 keeps the heartbeat's silence short, so each test takes seconds.
"""

import json
import os
import signal
import subprocess
import time

import pyctest
from clitest import (EXIT_CONNECTION, EXIT_ERROR, EXIT_LOST, EXIT_NOSESSION, EXIT_OK, EXIT_PROTOCOL, EXIT_TIMEOUT,
                     PYC_CLI, pyc, read_session, session_file, unique_name, wait_busy, wait_gone)

HB_MS = 1000
HEARTBEAT_SILENT = "does not answer its heartbeat: it is stopped or stuck"


def hb_env(**extra):
    return pyctest.child_env(PYC_CLI_HB_MS=str(HB_MS), **extra)


def timed(*args, env=None):
    """Runs pyc with args; returns (CompletedProcess, seconds it took)."""
    t0 = time.monotonic()
    p = pyc(*args, env=env or hb_env(), timeout=60)
    return p, time.monotonic() - t0


def new_with_env(sessions, **kernel_env):
    """A new session whose kernel gets kernel_env (limits are kernel options read from its environment)."""
    name = unique_name()
    pyc("new", name, env=pyctest.child_env(**kernel_env), check=EXIT_OK)
    sessions.adopt(name)
    return name


def test_a_stopped_kernel_ends_every_wait(sessions):
    name = sessions.new()
    pid = read_session(name)["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        for args in (("run", name, "1", "--timeout", "1"), ("run", name, "1"), ("vars", name)):
            p, took = timed(*args)
            assert p.returncode == EXIT_CONNECTION, (args, p.returncode, p.stderr)
            assert ("the kernel (pid %d) %s" % (pid, HEARTBEAT_SILENT)) in p.stderr, (args, p.stderr)
            assert took < 1 + HB_MS / 1000 + 3, (args, took)
        # status says what ls says: unresponsive (the JSON is printed, and the exit code is 6)
        p, took = timed("status", name)
        assert p.returncode == EXIT_CONNECTION, (p.returncode, p.stderr)
        st = json.loads(p.stdout)
        assert st["state"] == "unresponsive" and st["pid"] == pid and st["execution_count"] is None
        assert HEARTBEAT_SILENT in p.stderr
        assert took < 5, took
        assert "unresponsive" in pyc("ls", check=EXIT_OK).stdout
    finally:
        os.kill(pid, signal.SIGCONT)
    # the session works again
    assert pyc("run", name, "'again'", env=hb_env(), check=EXIT_OK).stdout == "'again'\n"
    assert json.loads(pyc("status", name, check=EXIT_OK).stdout)["state"] == "idle"


def test_a_kernel_stopped_during_the_cell_ends_the_wait(sessions):
    name = sessions.new()
    pid = read_session(name)["pid"]
    runner = subprocess.Popen([PYC_CLI, "run", name, "import time\ntime.sleep(30)", "--timeout", "20"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=hb_env())
    stopped = False
    try:
        assert wait_busy(name)
        os.kill(pid, signal.SIGSTOP)
        stopped = True
        t0 = time.monotonic()
        out, err = runner.communicate(timeout=30)
        assert time.monotonic() - t0 < 1 + HB_MS / 1000 + 3
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == EXIT_CONNECTION, (runner.returncode, err)
    assert HEARTBEAT_SILENT in err
    pyc("int", name, check=EXIT_OK)


def test_a_long_cell_does_not_trip_the_heartbeat_watch(sessions):
    """pyc's heartbeat is echoed by a thread of its own: a cell that runs three heartbeat windows answers."""
    name = sessions.new()
    p, took = timed("run", name, "import time\ntime.sleep(3)\nprint('slept')")
    assert p.returncode == EXIT_OK, (p.returncode, p.stderr)
    assert p.stdout == "slept\n" and took >= 3


def test_a_client_that_was_stopped_does_not_blame_the_kernel(sessions):
    """Time during which pyc itself was stopped (Ctrl-Z, a suspended laptop) is not the kernel's silence."""
    name = sessions.new()
    p = subprocess.Popen([PYC_CLI, "run", name, "import time\ntime.sleep(5)\nprint('done')"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=hb_env())
    try:
        time.sleep(1.0)
        p.send_signal(signal.SIGSTOP)
        time.sleep(3 * HB_MS / 1000)
        p.send_signal(signal.SIGCONT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == EXIT_OK, (p.returncode, err)
    assert out == "done\n"


def test_a_wrong_key_fails_within_seconds(sessions):
    name = sessions.new()
    wrong = unique_name("wrongkey")
    info = read_session(name)
    info["key"] = "0" * len(info["key"])
    fd = os.open(session_file(wrong), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f)
    try:
        for env in (hb_env(), pyctest.child_env()):        # the default bound too: a few seconds
            p, took = timed("run", wrong, "1", env=env)
            assert p.returncode == EXIT_PROTOCOL, (p.returncode, p.stderr)
            assert "the session file's key is probably not the kernel's" in p.stderr, p.stderr
            assert took < 6, took
        p, took = timed("vars", wrong)
        assert p.returncode == EXIT_PROTOCOL and "key" in p.stderr and took < 6, (p.returncode, p.stderr, took)
    finally:
        os.unlink(session_file(wrong))   # not `pyc kill`: the kernel is the other session's
    pyc("run", name, "1", check=EXIT_OK)


def test_system_exit_is_the_exit_code(sessions):
    name = sessions.new()
    p = pyc("run", name, "import sys\nprint('before')\nsys.exit(3)", check=3)
    assert p.stdout == "before\n" and p.stderr == ""
    assert pyc("run", name, "import sys; sys.exit(0)", check=EXIT_OK).stderr == ""
    assert pyc("run", name, "exit()", check=EXIT_OK).stderr == ""
    assert pyc("run", name, "raise SystemExit(-1)", check=255).stderr == ""
    p = pyc("run", name, "import sys; sys.exit('bye')", check=EXIT_ERROR)
    assert p.stderr == "bye\n"
    # --json prints the messages as they are; the exit code is the same
    p = pyc("run", name, "import sys; sys.exit(4)", "--json", check=4)
    lines = [json.loads(l) for l in p.stdout.splitlines()]
    assert [l["type"] for l in lines] == ["error", "execute_reply", "outcome"]
    assert lines[0]["content"]["ename"] == "SystemExit" and lines[0]["content"]["evalue"] == "4"
    assert lines[2] == {"type": "outcome", "outcome": "system_exit", "exit": 4, "by": "cell", "message": None}
    # a cell's status that is also one of pyc's own codes is still the cell's: nothing untrue is said about the
    # session, and --json's outcome line says whose the number is
    for code in (EXIT_LOST, EXIT_NOSESSION, EXIT_CONNECTION, EXIT_TIMEOUT):
        p = pyc("run", name, "import sys; sys.exit(%d)" % code, check=code)
        assert p.stderr == "", (code, p.stderr)
        line = json.loads(pyc("run", name, "raise SystemExit(%d)" % code, "--json", check=code).stdout.splitlines()[-1])
        assert line["outcome"] == "system_exit" and line["by"] == "cell" and line["exit"] == code, line
    # the session goes on
    assert pyc("run", name, "'alive'", check=EXIT_OK).stdout == "'alive'\n"


def test_a_deadline_keeps_the_session(sessions):
    name = sessions.new()
    pyc("run", name, "kept = 1", check=EXIT_OK)
    p = pyc("run", name, "import time\ntime.sleep(30)", "--timeout", "0.5", "--json", timeout=60)
    assert p.returncode == EXIT_TIMEOUT, (p.returncode, p.stderr)
    assert json.loads(p.stdout.splitlines()[-2])["metadata"]["pyc"]["state"] == "intact"
    assert pyc("run", name, "kept", check=EXIT_OK).stdout == "1\n"


def test_the_end_of_the_lifetime_is_lost(sessions):
    # 5 s: long enough that the run starts within the lifetime on a loaded machine (or under ASan)
    name = new_with_env(sessions, PYC_LIFETIME="5")
    pid = read_session(name)["pid"]
    p, took = timed("run", name, "import time\ntime.sleep(60)")
    assert p.returncode == EXIT_LOST, (p.returncode, p.stderr)
    assert "KernelLifetimeEnded" in p.stderr and "the session is lost" in p.stderr
    assert took < 20, took
    assert wait_gone(pid)


def test_a_cell_stuck_past_its_grace_is_lost(sessions):
    """A C loop that never checks for signals: interrupted at its deadline, still running after the cell
    grace, the kernel reports it and ends."""
    name = new_with_env(sessions, PYC_CELL_GRACE="1")
    pid = read_session(name)["pid"]
    p, took = timed("run", name, "sum(range(10**13))", "--timeout", "1")
    assert p.returncode == EXIT_LOST, (p.returncode, p.stderr)
    assert "did not stop" in p.stderr and "the session is lost" in p.stderr
    assert took < 20, took
    assert wait_gone(pid)
