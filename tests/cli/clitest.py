"""Helpers of the `pyc` command-line tests: the built program, named sessions that are always ended.

The parent conftest (tests/conftest.py) has already pointed JUPYTER_RUNTIME_DIR, JUPYTER_DATA_DIR,
JUPYTER_PATH and HOME at fresh temp dirs, so every `pyc` started here (and every kernel it starts) works in
them.  Every kernel pid a test learns of (from a session file) is registered with pyctest, whose session
finish kills any that is still alive and fails the run if there was one; and since a kernel whose session
file was never written or was removed escapes that, conftest.py's no_process_left also looks through /proc at
the end for any process that names the runtime dir (command line or environment).
"""

import json
import os
import subprocess
import time

import pytest

import pyctest

#: The `pyc` under test: $PYC_CLI (exported by `make check`), else `pyc` beside $PYC_KERNEL.
PYC_CLI = os.environ.get("PYC_CLI") or os.path.join(os.path.dirname(pyctest.PYC_KERNEL or "."), "pyc")

#: Exit codes (cli/cli.h).  0 and 1 are a cell's own status (ok, raised), as a script's; pyc's own outcomes
#: are in the sysexits range, 124 (timeout(1)'s code) and the two signal codes.
EXIT_OK, EXIT_ERROR = 0, 1
EXIT_USAGE = 64          # bad arguments
EXIT_REFUSED = 65        # the kernel refused the request
EXIT_NOINPUT = 66        # a local file or stdin could not be read
EXIT_NOSESSION = 67      # no such session, or stale
EXIT_CONNECTION = 69     # the kernel did not start or answer
EXIT_LOST = 70           # the session was lost: the kernel ended during the request
EXIT_OSERR = 71          # memory or a system call failed on pyc's side
EXIT_EXISTS = 73         # name already taken
EXIT_IOERR = 74          # a file or stdout could not be written
EXIT_PENDING = 75        # poll: not done yet
EXIT_PROTOCOL = 76       # the kernel's messages do not verify with our key, or make no sense
EXIT_NOPERM = 77         # the runtime dir cannot be used
EXIT_TIMEOUT = 124       # the cell passed its deadline and was stopped; the session is intact
EXIT_INTERRUPTED = 130
EXIT_PIPE = 141          # stdout's reader went away

_counter = [0]


def runtime_dir():
    return os.environ["JUPYTER_RUNTIME_DIR"]


def session_file(name):
    return os.path.join(runtime_dir(), "pyc-%s.json" % name)


def read_session(name):
    with open(session_file(name)) as f:
        return json.load(f)


def unique_name(tag="s"):
    _counter[0] += 1
    return "%s-%d-%d" % (tag, os.getpid(), _counter[0])


def pyc(*args, input=None, timeout=60, check=None, env=None):
    """Runs the built `pyc` with args; returns the CompletedProcess (text mode).  check=N asserts the exit
    code, showing the output when it differs."""
    if not os.access(PYC_CLI, os.X_OK):
        pytest.fail("the pyc program %s is not built (set PYC_CLI)" % PYC_CLI)
    p = subprocess.run(
        [PYC_CLI] + [str(a) for a in args],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or pyctest.child_env(),
    )
    if check is not None:
        assert p.returncode == check, "pyc %s: exit %d, expected %d\nstdout: %s\nstderr: %s" % (
            " ".join(map(str, args)), p.returncode, check, p.stdout, p.stderr)
    return p


def register_session(name):
    """Registers the kernel pid of session `name` for the end-of-run check; returns it."""
    pid = read_session(name).get("pid")
    if pid:
        pyctest.register_pid(pid)
    return pid


def wait_busy(name, timeout=10.0):
    """Waits until `pyc status` says session `name` runs a cell; returns whether it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if json.loads(pyc("status", name, check=EXIT_OK).stdout)["state"] == "busy":
            return True
        time.sleep(0.05)
    return False


def run_in_background(name, code):
    """Starts `pyc run name code` without waiting for it; returns the Popen (text mode)."""
    return subprocess.Popen([PYC_CLI, "run", name, code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=pyctest.child_env())


def pids_with_arg(arg):
    """Live processes that have `arg` as one of their command-line words."""
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


def wait_gone(pid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while pyctest.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not pyctest.pid_alive(pid)


class Sessions:
    """Sessions a test made; all are killed (by `pyc kill`, then by pid) when the test ends."""

    def __init__(self):
        self.names = []
        self.pids = set()

    def new(self, name=None, *extra, check=EXIT_OK):
        name = name or unique_name()
        p = pyc("new", name, *extra, check=check)
        if p.returncode == EXIT_OK:
            self.adopt(name)
        return name

    def adopt(self, name):
        """Takes responsibility for a session made otherwise (fork, a concurrent new)."""
        if name not in self.names:
            self.names.append(name)
        try:
            pid = register_session(name)
        except FileNotFoundError:
            return None
        if pid:
            self.pids.add(pid)
        return pid

    def close(self):
        for name in self.names:
            if os.path.exists(session_file(name)):
                try:
                    self.adopt(name)
                except (OSError, ValueError):
                    pass
                pyc("kill", name, timeout=30)
        for pid in self.pids:
            pyctest.kill_pid(pid)
