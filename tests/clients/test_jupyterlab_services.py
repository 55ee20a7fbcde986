"""A kernel run through `jupyter server` by @jupyterlab/services (tests/clients/services), JupyterLab's
own client library: KernelManager starts a `pyc` kernel over the REST API, the KernelConnection executes
code over the server's WebSocket and reads the iopub messages, and the kernel is shut down through the
server.

Needs Debian's jupyter-server and `npm ci` in tests/clients/services (.ci/deps does both).  Without them
the test skips, except in CI (CI=true) where it fails.
"""

import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from pyctest import IS_PYC, PYC_PYTHON, child_env, descendants_of, env_root, kill_pid, pid_alive, register_pid

HERE = os.path.dirname(os.path.abspath(__file__))
SERVICES_DIR = os.path.join(HERE, "services")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(ok, what):
    """Skip (or, in CI, fail) when a prerequisite is missing."""
    if ok:
        return
    if IN_CI:
        pytest.fail("%s (CI is set, so a missing prerequisite is a failure; .ci/deps installs it)" % what)
    pytest.skip("%s; run .ci/deps to install it" % what)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_get(base, token, path, timeout=2.0):
    req = urllib.request.Request(base + path, headers={"Authorization": "token " + token})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())


class Watched:
    """The processes this test starts, and every process found under them while they ran (the server's
    kernels): registered with pyctest and killed by pid at the end."""

    def __init__(self):
        self.roots = []
        self.seen = set()

    def start(self, argv, **kw):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=child_env(), **kw)
        register_pid(p.pid)
        self.roots.append(p)
        return p

    def scan(self):
        for p in self.roots:
            if p.poll() is None:
                for c in descendants_of(p.pid):
                    if c not in self.seen:
                        self.seen.add(c)
                        register_pid(c)

    def wait(self, p, timeout):
        deadline = time.monotonic() + timeout
        while p.poll() is None:
            self.scan()
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def close(self):
        for p in reversed(self.roots):
            self.scan()
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)  # the server shuts its kernels down
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    kill_pid(p.pid)
        deadline = time.monotonic() + 3
        while any(pid_alive(c) for c in self.seen) and time.monotonic() < deadline:
            time.sleep(0.05)
        for c in self.seen:
            kill_pid(c)


@pytest.fixture
def server(tmp_path):
    """A `jupyter server` on 127.0.0.1 with a random token; yields (base url, token, Watched, log path)."""
    require(shutil.which("node") is not None, "node is not installed")
    require(
        os.path.isdir(os.path.join(SERVICES_DIR, "node_modules", "@jupyterlab", "services")),
        "@jupyterlab/services is not installed (npm ci in %s)" % SERVICES_DIR,
    )
    require(
        importlib.util.find_spec("jupyter_server") is not None,
        "jupyter_server is not installed for %s (Debian package python3-jupyter-server)" % PYC_PYTHON,
    )
    port = free_port()
    token = secrets.token_hex(16)
    base = "http://127.0.0.1:%d" % port
    root = tmp_path / "root"
    root.mkdir()
    log_path = os.path.join(env_root(), "logs", "jupyter-server-%d.log" % port)
    watched = Watched()
    try:
        with open(log_path, "wb") as log:
            proc = watched.start(
                [
                    PYC_PYTHON, "-m", "jupyter_server",
                    "--no-browser", "--allow-root",
                    "--ip=127.0.0.1", "--port=%d" % port, "--ServerApp.port_retries=0",
                    "--ServerApp.token=%s" % token,
                    "--ServerApp.password=",
                    "--ServerApp.root_dir=%s" % root,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 30
        specs, last = None, None
        while specs is None and proc.poll() is None and time.monotonic() < deadline:
            try:
                specs = api_get(base, token, "/api/kernelspecs")
            except Exception as e:  # not listening yet
                last = e
                time.sleep(0.1)
        if specs is None:
            with open(log_path, errors="replace") as f:
                pytest.fail("jupyter server did not answer (%s; exit %s):\n%s" % (last, proc.poll(), f.read()[-3000:]))
        assert "pyc" in specs.get("kernelspecs", {}), "the server does not see the pyc kernelspec: %s" % specs
        yield base, token, watched, log_path
    finally:
        watched.close()


def test_kernel_through_jupyterlab_services(server, tmp_path):
    base, token, watched, log_path = server
    cfg = {"baseUrl": base, "token": token, "kernelName": "pyc", "codes": ["print(6*7)", "1+1"], "timeoutMs": 40000}
    cfg_path = tmp_path / "config.json"
    cfg_path.write_text(json.dumps(cfg))
    with open(tmp_path / "stdout.txt", "wb") as out, open(tmp_path / "stderr.txt", "wb") as err:
        node = watched.start(["node", "services.mjs", str(cfg_path)], cwd=SERVICES_DIR, stdout=out, stderr=err)
        finished = watched.wait(node, 50)
    if not finished:
        kill_pid(node.pid)
    stdout = (tmp_path / "stdout.txt").read_text(errors="replace")
    stderr = (tmp_path / "stderr.txt").read_text(errors="replace")
    with open(log_path, errors="replace") as f:
        server_log = f.read()[-3000:]
    context = "\n--- node stderr ---\n%s\n--- server log ---\n%s" % (stderr[-3000:], server_log)
    assert finished, "services.mjs did not finish within 50 s; stdout: %s%s" % (stdout, context)
    try:
        result = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        pytest.fail("services.mjs printed no JSON (exit %s); stdout: %s%s" % (node.returncode, stdout, context))
    print(json.dumps(result, indent=1))
    assert result["ok"], "services.mjs failed: %s%s" % (result.get("error"), context)
    assert node.returncode == 0

    # started through the server, connected over its WebSocket
    assert result["kernelName"] == "pyc"
    assert result["connectionStatus"] == "connected"
    assert result["info"]["language"] == "python"
    assert result["info"]["protocol_version"].startswith("5."), result["info"]
    if IS_PYC:
        assert result["info"]["implementation"] == "pyc", result["info"]

    (first, second) = result["executions"]
    for ex in (first, second):
        types = [m["msg_type"] for m in ex["iopub"]]
        assert ex["reply"]["status"] == "ok", ex
        assert types[0] == "status" and ex["iopub"][0]["content"]["execution_state"] == "busy", types
        assert types[-1] == "status" and ex["iopub"][-1]["content"]["execution_state"] == "idle", types
        assert "execute_input" in types, types
        assert "error" not in types, ex["iopub"]

    streams = [m["content"] for m in first["iopub"] if m["msg_type"] == "stream"]
    assert "".join(s["text"] for s in streams if s["name"] == "stdout") == "42\n", first["iopub"]
    assert not [m for m in first["iopub"] if m["msg_type"] == "execute_result"], first["iopub"]

    results = [m["content"] for m in second["iopub"] if m["msg_type"] == "execute_result"]
    assert len(results) == 1, second["iopub"]
    assert results[0]["data"]["text/plain"] == "2"
    assert results[0]["execution_count"] == second["reply"]["execution_count"] == first["reply"]["execution_count"] + 1

    # shut down through the server: gone from /api/kernels, and its process has ended
    assert result["statusAfterShutdown"] == "dead", result["statusAfterShutdown"]
    assert result["kernelId"] not in result["runningAfterShutdown"]
    assert api_get(base, token, "/api/kernels") == []
    kernels = [p for p in watched.seen if p not in (r.pid for r in watched.roots)]
    assert kernels, "no kernel process was seen under the server"
    deadline = time.monotonic() + 5
    while any(pid_alive(p) for p in kernels) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in kernels if pid_alive(p)], "kernel processes still alive after the shutdown"
