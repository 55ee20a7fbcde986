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
import subprocess
import time

import pytest

from pyctest import IS_PYC, PYC_PYTHON, child_env, env_root, handshake_pythonpath, kill_pid, pid_alive
from webserver import Watched, api_call, api_get, free_port, require

HERE = os.path.dirname(os.path.abspath(__file__))
SERVICES_DIR = os.path.join(HERE, "services")


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
                # the pyc-handshake kernelspec's provisioner (pyc_client) and its entry point
                env=child_env(PYTHONPATH=os.pathsep.join(handshake_pythonpath())),
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


def run_services(server, tmp_path, **extra):
    """Runs services.mjs with a config and returns its JSON result.

    A kernel the server starts on the ports jupyter_client picked can find one of them taken by another
    process of the parallel run before it binds it (the client's port race, the same for every kernel: see
    pyctest.Kernel); the kernel then exits with "Address already in use" and the run waits for a kernel_info
    that never comes.  Such a run, and only such a one, is tried again (at most twice more)."""
    log_path = server[3]
    for attempt in range(3):
        with open(log_path, "rb") as f:
            seen = len(f.read())
        try:
            return _run_services_once(server, tmp_path, **extra)
        except AssertionError:
            with open(log_path, "rb") as f:
                f.seek(seen)
                lost_race = b"Address already in use" in f.read()
            if not lost_race or attempt == 2:
                raise
            # The kernel that lost the race is shut down through the server before the next try.
            base, token = server[0], server[1]
            for model in api_get(base, token, "/api/kernels"):
                api_call(base, token, "DELETE", "/api/kernels/" + model["id"], timeout=10)


def _run_services_once(server, tmp_path, **extra):
    base, token, watched, log_path = server
    cfg = {"baseUrl": base, "token": token, "kernelName": "pyc", "codes": ["print(6*7)", "1+1"], "timeoutMs": 40000}
    cfg.update(extra)
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
    last_line = server_log.rstrip().rsplit("\n", 1)[-1][:200]
    assert result["ok"], "services.mjs failed: %s (statuses %s, connection %s; the server log ends: %r)%s" % (
        result.get("error"),
        result.get("statuses"),
        result.get("connectionStatuses"),
        last_line,
        context,
    )
    assert node.returncode == 0
    return result


def test_kernel_through_jupyterlab_services(server, tmp_path):
    base, token, watched, log_path = server
    result = run_services(server, tmp_path)

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


def test_debugger_through_jupyterlab_services(server, tmp_path):
    """One breakpoint round trip with KernelConnection.requestDebug, as JupyterLab's debugger makes it."""
    pytest.importorskip("debugpy")
    result = run_services(server, tmp_path, codes=[], debug=True)
    d = result["debug"]
    assert d["initialize"] and d["attach"] and d["configurationDone"], d
    assert d["hashMethod"] == "Murmur2" and d["prefixMatches"], d
    assert d["verified"] == [True], d
    assert d["stoppedReason"] == "breakpoint", d
    assert d["topFrame"] == {"name": "f", "line": 2}, d
    assert d["continued"] and d["cellStatus"] == "ok" and d["cellOutput"] == "5\n", d
    assert d["disconnect"], d
    assert "stopped" in d["events"] and "continued" in d["events"], d["events"]


@pytest.mark.skipif(not IS_PYC, reason="the pyc-handshake kernelspec is pyc's")
def test_handshake_kernel_through_jupyter_server(server, tmp_path):
    """The pyc-handshake kernelspec: jupyter_server starts the kernel through pyc_client's provisioner (the 5.6
    handshake), the WebSocket runs cells before and after a restart through the REST API, and the kernel is
    shut down through the server."""
    base, token, watched, log_path = server
    result = run_services(server, tmp_path, kernelName="pyc-handshake", codes=["print(6*7)"], restart=True)
    assert result["kernelName"] == "pyc-handshake"
    assert [e["reply"]["status"] for e in result["executions"]] == ["ok"]
    assert result["afterRestart"]["status"] == "ok", result["afterRestart"]
    assert result["afterRestart"]["pidChanged"], result["afterRestart"]
    assert result["statusAfterShutdown"] == "dead"
    assert api_get(base, token, "/api/kernels") == []
    with open(log_path, errors="replace") as f:
        server_log = f.read()
    assert "Traceback" not in server_log, server_log[-3000:]


@pytest.mark.skipif(not IS_PYC, reason="the pyc-template kernelspec is pyc's")
def test_template_sessions_through_jupyter_server(server, tmp_path):
    """The pyc-template kernelspec: jupyter_server starts each kernel as a fork of the warm template through
    pyc_client's template provisioner; the session has the template's start-up names, two sessions do not
    share state, a restart through the REST API is a fresh fork (a new pid, the template's names, not the
    session's), and shutdown goes through the server.  The template is the server's child, ended with it."""
    base, token, watched, log_path = server
    result = run_services(server, tmp_path, kernelName="pyc-template", codes=["x = 7; print(PRELOADED)"],
                          restart=True)
    assert result["kernelName"] == "pyc-template"
    (execution,) = result["executions"]
    assert execution["reply"]["status"] == "ok"
    assert [m["content"]["text"] for m in execution["iopub"] if m["msg_type"] == "stream"] == ["42\n"]
    assert result["afterRestart"]["status"] == "ok", result["afterRestart"]
    assert result["afterRestart"]["pidChanged"], result["afterRestart"]
    assert result["statusAfterShutdown"] == "dead"
    # A second kernel of the same kernelspec: forked from the same template, without the first one's x.
    result = run_services(server, tmp_path, kernelName="pyc-template", codes=["print(PRELOADED, 'x' in dir())"])
    (execution,) = result["executions"]
    assert [m["content"]["text"] for m in execution["iopub"] if m["msg_type"] == "stream"] == ["42 False\n"]
    assert api_get(base, token, "/api/kernels") == []
    with open(log_path, errors="replace") as f:
        server_log = f.read()
    assert "Traceback" not in server_log, server_log[-3000:]
    assert server_log.count("template pyc-template started") == 1, server_log[-3000:]
