"""An idle kernel sleeps (issue 22): no timer wakes its main thread while no request comes, yet what it
waits for still happens at once -- the end of its parent (test_process.py), of a forked session
(test_fork.py), a timer of the kernel's asyncio loop that a cell set.

The wakeups are counted on the main thread alone (its thread id is the process id), from the kernel's own
/proc/PID/task/PID/status: the other threads wake for what a client does (heartbeat pings, the ZeroMQ I/O
thread), and during the window the test sends nothing."""

import os
import time

import pytest

from pyctest import TIMEOUT, drain, execute, pyc_only

pytestmark = pyc_only

WINDOW = 5.0


def voluntary_switches(pid):
    """How often the process's main thread has gone to sleep so far."""
    with open("/proc/%d/task/%d/status" % (pid, pid)) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc/%d/task/%d/status" % (pid, pid))


def main_thread_wakeups(kernel, window=WINDOW):
    """The main thread's wakeups over window seconds in which no request is sent."""
    drain(kernel.kc, "iopub", quiet=0.3)        # the last request's history commit and idle are behind it
    before = voluntary_switches(kernel.pid)
    time.sleep(window)
    return voluntary_switches(kernel.pid) - before


def thread_switches(pid, name):
    """How often the kernel's thread called name has gone to sleep so far."""
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
            if f.read().strip() != name:
                continue
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
    raise AssertionError("the kernel has no thread called %r" % name)


def test_requests_without_cells_do_not_wake_the_history_writer(fresh_kernel):
    """The history writer wakes for rows to commit, not for requests: after a cell's batch is committed,
    requests that run no cell (kernel_info here; comms and completions alike) leave it asleep.  (It once woke
    twice for each, to commit nothing.)"""
    kernel = fresh_kernel
    execute(kernel.kc, "x = 1")
    time.sleep(0.4)                              # the cell's batch: 100 ms, then its commit
    before = thread_switches(kernel.pid, "pyc-history")
    for _ in range(8):
        msg_id = kernel.kc.kernel_info()
        while kernel.kc.get_shell_msg(timeout=TIMEOUT)["parent_header"].get("msg_id") != msg_id:
            pass
        time.sleep(0.15)                         # longer than a batch: each would have been a batch of its own
    assert thread_switches(kernel.pid, "pyc-history") - before <= 1


def test_idle_kernel_does_not_wake(fresh_kernel):
    """After a request, the main thread sleeps until the next one: no tick (it used to wake once a second
    to look for its parent and reap children)."""
    execute(fresh_kernel.kc, "x = 1")
    assert main_thread_wakeups(fresh_kernel) == 0


def test_idle_kernel_with_an_asyncio_loop_does_not_wake(fresh_kernel):
    """A kernel whose asyncio loop exists, with nothing scheduled, waits on the loop's selector without a
    timeout."""
    reply, _ = execute(fresh_kernel.kc, "import asyncio\nawait asyncio.sleep(0)\nx = 1")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert main_thread_wakeups(fresh_kernel) == 0


def test_asyncio_timer_fires_while_idle(fresh_kernel, tmp_path):
    """A timer that a cell set on the kernel's loop fires on time while no request comes: the wait between
    requests lasts until the loop's next timer."""
    path = str(tmp_path / "fired")
    code = ("import asyncio, time\n"
            "t0 = time.monotonic()\n"
            "def fire():\n"
            "    with open(%r, 'w') as f:\n"
            "        f.write('%%.3f' %% (time.monotonic() - t0))\n"
            "asyncio.get_event_loop().call_later(1.0, fire)\n") % path
    reply, _ = execute(fresh_kernel.kc, code)
    assert reply["content"]["status"] == "ok", reply["content"]
    deadline = time.monotonic() + 5
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(path), "the asyncio timer set by a cell did not fire within 5 s while idle"
    time.sleep(0.1)
    with open(path) as f:
        after = float(f.read() or "nan")
    assert 0.9 <= after < 3.0, "the 1 s timer fired after %.3f s" % after


def test_asyncio_task_runs_while_idle_then_sleeps(fresh_kernel, tmp_path):
    """A task that sleeps in steps runs to its end between requests, and then the kernel sleeps too."""
    path = str(tmp_path / "steps")
    code = ("import asyncio\n"
            "async def steps():\n"
            "    for i in range(3):\n"
            "        await asyncio.sleep(0.2)\n"
            "    with open(%r, 'w') as f:\n"
            "        f.write('done')\n"
            "task = asyncio.get_event_loop().create_task(steps())\n") % path
    reply, _ = execute(fresh_kernel.kc, code)
    assert reply["content"]["status"] == "ok", reply["content"]
    deadline = time.monotonic() + TIMEOUT
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(path), "the task did not finish while the kernel was idle"
    assert main_thread_wakeups(fresh_kernel, 3.0) == 0
