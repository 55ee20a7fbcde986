"""What the client tests that drive a Jupyter server (the Notebook page in Chromium, @jupyterlab/services
from Node) share: prerequisites, ports, the server's REST API, and the processes they start, each ended
by pid at the end (the servers' kernels and Chromium's helpers included)."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from pyctest import child_env, descendants_of, kill_pid, pid_alive, register_pid

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(ok, what):
    """Skip (or, in CI, fail) when a prerequisite of a client test is missing."""
    if ok:
        return
    if IN_CI:
        pytest.fail("%s (CI is set, so a missing prerequisite is a failure; .ci/deps installs it)" % what)
    pytest.skip("%s; run .ci/deps to install it" % what)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marked_pids(marker):
    """Pids (other than this one) whose command line contains marker."""
    key = marker.encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                if key in f.read():
                    pids.append(int(entry))
        except OSError:
            pass
    return pids


class Watched:
    """Processes started by this module: each pid, and every process found under it while it ran, is
    registered with pyctest and killed by pid at the end."""

    def __init__(self, marker=None):
        # marker: a path unique to this run; a process whose command line holds it is ours even when it has
        # left the tree (Chromium's crashpad handlers are reparented to init, their --database is in $HOME)
        self.marker = marker
        self.roots = []
        self.seen = set()

    def start(self, argv, env=None, **kw):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=env or child_env(), **kw)
        register_pid(p.pid)
        self.roots.append(p)
        return p

    def scan(self):
        found = [c for p in self.roots if p.poll() is None for c in descendants_of(p.pid)]
        if self.marker is not None:
            found += marked_pids(self.marker)
        for c in found:
            if c not in self.seen:
                self.seen.add(c)
                register_pid(c)

    def wait(self, p, timeout):
        """Wait for p while scanning for new descendants; returns False on timeout."""
        deadline = time.monotonic() + timeout
        while p.poll() is None:
            self.scan()
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self, p, grace=10.0):
        """SIGTERM (a Jupyter server then shuts its kernels down), then SIGKILL by pid."""
        self.scan()
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                kill_pid(p.pid)
        p.poll()

    def close(self):
        for p in reversed(self.roots):
            self.stop(p)
        self.scan()
        deadline = time.monotonic() + 3
        while any(pid_alive(c) for c in self.seen) and time.monotonic() < deadline:
            time.sleep(0.05)
        for c in self.seen:
            kill_pid(c)


def api_get(base, token, path, timeout=2.0):
    req = urllib.request.Request(base + path, headers={"Authorization": "token " + token})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())


def wait_server(proc, base, token, log_path, timeout=30.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            return api_get(base, token, "/api/kernelspecs")
        except Exception as e:  # not listening yet
            last = e
            time.sleep(0.1)
    with open(log_path, errors="replace") as f:
        log = f.read()[-3000:]
    pytest.fail("the server did not answer at %s (%s; exit %s):\n%s" % (base, last, proc.poll(), log))
