"""Agent frameworks that hard-code the kernel name get pyc without being changed (README "Agent frameworks").

Most ask for "python3" (E2B, OpenHands, smolagents, AutoGen, MetaGPT), or "python", which jupyter_client's
KernelManager turns into "python3", or take the server's default kernel.  So pyc is installed under the
name python3 (`pyc-kernel install --user --name python3`; `--name python` does the same), or a Jupyter
server is told `--MappingKernelManager.default_kernel_name=pyc`.  These tests do both in directories of
their own and start kernels the ways the frameworks do: jupyter_client's KernelManager, nbclient (which
appends --HistoryManager.hist_file=:memory: to a kernel named python3), and a real jupyter_server's REST
API and WebSocket (jpserver.py).

Against another kernel (PYC_TEST_ARGV, calibration) the kernelspec named python3 runs that kernel instead.
"""

import json
import os
import subprocess
import time

import pytest

from jpserver import JupyterServer
from pyctest import (
    IS_PYC,
    PYC_KERNEL,
    TIMEOUT,
    Kernel,
    child_env,
    eval_value,
    execute,
    kernel_argv_template,
    kill_pid,
    pid_alive,
    pyc_only,
    register_pid,
    stream_text,
)

IMPLEMENTATION = "pyc" if IS_PYC else "ipython"


def install(data_dir, *args, env=None):
    """`pyc-kernel install --user ARGS` into data_dir (JUPYTER_DATA_DIR); returns the CompletedProcess."""
    e = child_env(JUPYTER_DATA_DIR=str(data_dir), **(env or {}))
    return subprocess.run([PYC_KERNEL, "install", "--user"] + list(args), capture_output=True, text=True,
                          timeout=TIMEOUT, env=e)  # fmt: skip


def install_kernel_under_test(data_dir, name):
    """The kernel under test as kernelspec NAME in data_dir: pyc through its installer, another kernel
    (calibration) as a plain kernel.json."""
    if IS_PYC:
        p = install(data_dir, "--name", name)
        assert p.returncode == 0, p.stderr
    else:
        kdir = os.path.join(str(data_dir), "kernels", name)
        os.makedirs(kdir, exist_ok=True)
        with open(os.path.join(kdir, "kernel.json"), "w") as f:
            json.dump({"argv": kernel_argv_template(), "display_name": name, "language": "python"}, f)
    return os.path.join(str(data_dir), "kernels", name)


def wait_gone(pid, timeout=5.0):
    """Give a kernel its client shut down the time to go, then kill it by pid."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    kill_pid(pid)


def read_spec(kdir):
    with open(os.path.join(kdir, "kernel.json")) as f:
        return json.load(f)


# ---- pyc-kernel install under the names frameworks use ----------------------------------------------------


@pyc_only
def test_install_name_python3(tmp_path, monkeypatch):
    data = tmp_path / "data"
    p = install(data, "--name", "python3")
    assert p.returncode == 0, p.stderr
    kdir = data / "kernels" / "python3"
    assert "Installed kernelspec python3 in %s" % kdir in p.stdout
    spec = read_spec(kdir)
    assert spec["argv"] == [os.path.realpath(PYC_KERNEL), "-f", "{connection_file}"]
    assert spec["display_name"] == "Python 3 (pyc)"
    assert (kdir / "logo-64x64.png").exists()
    # a display name of one's choice (a launcher that shows "Python 3")
    p = install(data, "--name", "python3", "--display-name", "Python 3")
    assert p.returncode == 0, p.stderr
    assert read_spec(kdir)["display_name"] == "Python 3"

    # jupyter_client finds it first: the user's data dir comes before Debian's /usr/share/jupyter/kernels/python3
    # (ipykernel), and its argv is not replaced by ipykernel's own (that happens only for ipykernel's RESOURCES)
    from jupyter_client.kernelspec import KernelSpecManager

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    ksm = KernelSpecManager()
    assert ksm.find_kernel_specs()["python3"] == str(kdir)
    assert ksm.get_kernel_spec("python3").argv[0] == os.path.realpath(PYC_KERNEL)


@pyc_only
def test_install_name_python_installs_python3(tmp_path):
    """jupyter_client starts the kernelspec python3 for the name python, so --name python installs python3: a
    kernelspec named python would be listed but never started."""
    data = tmp_path / "data"
    p = install(data, "--name", "python")
    assert p.returncode == 0, p.stderr
    assert "installing it as python3" in p.stdout, p.stdout
    assert (data / "kernels" / "python3" / "kernel.json").exists()
    assert not (data / "kernels" / "python").exists()


@pyc_only
def test_install_says_when_another_kernelspec_comes_first(tmp_path):
    first = tmp_path / "first"
    (first / "kernels" / "python3").mkdir(parents=True)
    (first / "kernels" / "python3" / "kernel.json").write_text(
        json.dumps({"argv": ["python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "Python 3 (ipykernel)", "language": "python"}))  # fmt: skip
    data = tmp_path / "data"
    p = install(data, "--name", "python3", env={"JUPYTER_PATH": str(first)})
    assert p.returncode == 0, p.stderr
    assert "the kernelspec python3 in %s comes first" % (first / "kernels" / "python3") in p.stdout, p.stdout
    # nothing to say when the one written is the one found
    p = install(data, "--name", "python3", env={"JUPYTER_PATH": str(tmp_path / "empty")})
    assert p.returncode == 0 and "comes first" not in p.stdout, p.stdout


@pyc_only
def test_kernel_takes_ipython_options(tmp_path):
    """What launchers append for ipykernel (nbclient: --HistoryManager.hist_file=:memory:) does not stop pyc:
    the history file is honoured, other IPython options are logged and ignored."""
    k = Kernel("pyc", extra_arguments=["--HistoryManager.hist_file=:memory:", "--IPKernelApp.matplotlib=inline"])
    try:
        assert eval_value(k.kc, "__import__('os').environ['PYC_HISTORY_FILE']") == "':memory:'"
        execute(k.kc, "a = 1")
        reply, _ = execute(k.kc, "a + 1")
        assert reply["content"]["status"] == "ok"
        assert "ignoring the IPython option --IPKernelApp.matplotlib" in k.stderr()
        assert "HistoryManager" not in k.stderr()
    finally:
        k.shutdown()


# ---- jupyter_client and nbclient asking for python / python3 ------------------------------------------------


@pytest.mark.parametrize("name", ["python", "python3"])
def test_kernelmanager_name_starts_it(tmp_path, monkeypatch, name):
    data = tmp_path / "data"
    install_kernel_under_test(data, "python3")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    k = Kernel(name)
    try:
        assert k.km.kernel_name == "python3"
        assert k.kernel_info()["implementation"] == IMPLEMENTATION
        if IS_PYC:
            with open("/proc/%d/cmdline" % k.pid, "rb") as f:
                assert f.read().split(b"\0")[0].decode() == os.path.realpath(PYC_KERNEL)
        _, msgs = execute(k.kc, "print(6 * 7)")
        assert stream_text(msgs) == "42\n"
    finally:
        k.shutdown()


def test_nbclient_python3_name(tmp_path, monkeypatch):
    """nbclient (AutoGen's JupyterCodeExecutor, MetaGPT) with kernel_name python3: the kernel gets nbclient's
    --HistoryManager.hist_file=:memory: and runs."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook

    data = tmp_path / "data"
    install_kernel_under_test(data, "python3")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    nb = new_notebook(cells=[new_code_cell("import sys\nx = 6 * 7\nprint(x)"), new_code_cell("x + 1")])
    client = NotebookClient(nb, kernel_name="python3", timeout=60, startup_timeout=60)
    pids = []

    def on_start(notebook=None, **_):
        pids.append(register_pid(client.km.provisioner.process.pid))

    client.on_notebook_start = on_start
    try:
        client.execute()
    finally:
        for pid in pids:
            wait_gone(pid)
    assert nb.cells[0].outputs[0]["text"] == "42\n"
    assert nb.cells[1].outputs[0]["data"]["text/plain"] == "43"


# ---- a jupyter_server: POST /api/kernels by name and by default, then the WebSocket -------------------------


def check_kernel(srv, model, expected_name, shutdown=True):
    """The kernel of model is the kernel under test (kernel_info, and its process's argv) and runs cells over
    the server's WebSocket."""
    assert model["name"] == expected_name, model
    procs = srv.kernel_processes()
    if IS_PYC:
        assert any(argv and argv[0] == os.path.realpath(PYC_KERNEL) for argv in procs.values()), procs
    with srv.websocket(model["id"]) as ws:
        reply, iopub = ws.request("kernel_info_request", {})
        assert reply["msg_type"] == "kernel_info_reply"
        assert reply["content"]["implementation"] == IMPLEMENTATION, reply["content"]
        reply, iopub = ws.execute("x = 6 * 7\nprint('x is', x)")
        assert reply["content"]["status"] == "ok", reply["content"]
        types = [m["msg_type"] for m in iopub]
        assert types[0] == "status" and types[-1] == "status", types
        assert "execute_input" in types
        assert "".join(m["content"]["text"] for m in iopub if m["msg_type"] == "stream") == "x is 42\n"
        reply, iopub = ws.execute("x + 1")
        results = [m["content"]["data"]["text/plain"] for m in iopub if m["msg_type"] == "execute_result"]
        assert results == ["43"], iopub
        reply, iopub = ws.execute("1 / 0")
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "ZeroDivisionError"
        assert [m["content"]["ename"] for m in iopub if m["msg_type"] == "error"] == ["ZeroDivisionError"]
    if shutdown:
        srv.shutdown_kernel(model["id"])


@pytest.fixture(scope="module")
def python3_server(tmp_path_factory):
    """A server whose user data dir holds the kernel under test as python3 (and no default set)."""
    tmp = tmp_path_factory.mktemp("python3-server")
    install_kernel_under_test(tmp / "data", "python3")
    srv = JupyterServer(tmp, env={"JUPYTER_DATA_DIR": str(tmp / "data")})
    srv.start()
    yield srv
    srv.stop()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["python3", "python", "no name"])
def test_server_python3(python3_server, how):
    """POST /api/kernels with {"name": "python3"}, {"name": "python"}, or no body (the server's default,
    python3) all start the kernel installed as python3."""
    srv = python3_server
    assert srv.get("/api/kernelspecs")["default"] == "python3"
    model = srv.start_kernel(None if how == "no name" else how)
    check_kernel(srv, model, "python3")


@pytest.mark.timeout(120)
def test_server_session_python3(python3_server):
    """POST /api/sessions (the notebook-style clients: a path and a kernel by name)."""
    srv = python3_server
    status, session = srv.call("POST", "/api/sessions",
                               {"path": "agent.ipynb", "type": "notebook", "kernel": {"name": "python3"}})  # fmt: skip
    assert status == 201, (status, session)
    check_kernel(srv, session["kernel"], "python3", shutdown=False)
    status, _ = srv.call("DELETE", "/api/sessions/" + session["id"])
    assert status == 204
    assert session["kernel"]["id"] not in [k["id"] for k in srv.get("/api/kernels")]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["command line", "config file"])
def test_server_default_kernel_name(tmp_path, how):
    """A server told that its default kernel is pyc (--MappingKernelManager.default_kernel_name=pyc, or the
    same in jupyter_server_config.json) starts pyc for a POST /api/kernels without a name."""
    config = tmp_path / "config"
    config.mkdir()
    if how == "config file":
        (config / "jupyter_server_config.json").write_text(
            json.dumps({"MappingKernelManager": {"default_kernel_name": "pyc"}}))  # fmt: skip
    srv = JupyterServer(tmp_path, default_kernel_name="pyc" if how == "command line" else None,
                        env={"JUPYTER_CONFIG_DIR": str(config)})  # fmt: skip
    srv.start()
    try:
        assert srv.get("/api/kernelspecs")["default"] == "pyc"
        model = srv.start_kernel(None)
        check_kernel(srv, model, "pyc")
        # an explicit {} body takes the default too
        status, model = srv.call("POST", "/api/kernels", {})
        assert status == 201 and model["name"] == "pyc", model
        srv.watched.scan()
        srv.shutdown_kernel(model["id"])
    finally:
        srv.stop()
    assert not any(pid_alive(p) for p in srv.watched.seen)
