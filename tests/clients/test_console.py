"""`jupyter console --kernel=pyc`, driven with pexpect like a terminal user."""

import time

import pexpect
import pytest

from pyctest import PYC_PYTHON, child_env, descendants_of, kill_pid, pid_alive, register_pid

PROMPT = r"In \[\d+\]: "


@pytest.fixture
def console():
    child = pexpect.spawn(
        PYC_PYTHON,
        ["-m", "jupyter_console", "--kernel=pyc", "--simple-prompt", "--ZMQTerminalInteractiveShell.kernel_timeout=60"],
        encoding="utf-8",
        env=child_env(),
        timeout=60,
        dimensions=(40, 200),
    )
    register_pid(child.pid)
    child.kids = []
    yield child
    if child.isalive():
        child.terminate(force=True)
    kill_pid(child.pid)
    for pid in child.kids:
        deadline = time.monotonic() + 5
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        kill_pid(pid)


def record_kids(child):
    for pid in descendants_of(child.pid):
        if pid not in child.kids:
            child.kids.append(pid)
            register_pid(pid)


@pytest.mark.timeout(120)
def test_console_session(console):
    c = console
    c.expect(PROMPT)
    record_kids(c)
    assert c.kids, "the console started no kernel process"
    # jupyter_console waits only for the kernel_info reply on shell before its first prompt; its iopub
    # subscription may not be connected yet (ZeroMQ slow joiner), and a cell whose idle it misses makes it
    # hang.  Give the subscription a moment.
    time.sleep(1.0)
    c.sendline("6*7")
    c.expect(r"Out\[\d+\]: 42")
    c.expect(PROMPT)
    c.sendline("zz_console = 5")
    c.expect(PROMPT)
    c.sendline("print(zz_console + 1)")
    c.expect(r"\r?\n6\r?\n")
    c.expect(PROMPT)
    c.sendline("1 / 0")
    c.expect("ZeroDivisionError")
    c.expect(PROMPT)
    c.sendline("zz_console * 2")
    c.expect(r"Out\[\d+\]: 10")
    c.expect(PROMPT)
    # Ctrl-D, and confirm if asked
    c.sendeof()
    i = c.expect([r"(?i)really want to exit", pexpect.EOF], timeout=30)
    if i == 0:
        c.sendline("y")
        c.expect(pexpect.EOF, timeout=30)
    c.close()
    assert c.exitstatus == 0, (c.exitstatus, c.signalstatus)
    # the console shut its kernel down
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in c.kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(p) for p in c.kids), "the kernel outlived the console"
