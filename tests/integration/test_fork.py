"""Session fork (DESIGN.md section 5, issue 4): the comm target pyc.fork makes full kernels out of the live
one.  Each child starts from the parent's state copy-on-write, answers on its own ports with its own key,
is reachable through the connection file it wrote, leaves the parent's process group and dies with the
parent unless asked to outlive it."""

import contextlib
import importlib.util
import json
import os
import signal
import time
import uuid

import pytest

import pyctest
from pyctest import (
    IS_PYC,
    NOT_PYC_REASON,
    TIMEOUT,
    connect_client,
    eval_value,
    execute,
    kill_pid,
    register_pid,
    request,
    stream_text,
)

pytestmark = pytest.mark.skipif(not IS_PYC, reason=NOT_PYC_REASON)


def fork(kc, n=1, outlive=False, timeout=TIMEOUT, **more):
    """Opens a pyc.fork comm and returns the data of the kernel's answer (after its comm_close); more goes
    into the request's data as it is."""
    comm_id = uuid.uuid4().hex
    msg = kc.session.msg("comm_open", {"comm_id": comm_id, "target_name": "pyc.fork",
                                       "data": dict({"n": n, "outlive": outlive}, **more)})
    kc.shell_channel.send(msg)
    data, closed = None, False
    deadline = time.monotonic() + timeout
    while not closed:
        m = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if m["content"].get("comm_id") != comm_id:
            continue
        if m["msg_type"] == "comm_msg":
            data = m["content"]["data"]
        elif m["msg_type"] == "comm_close":
            closed = True
    for c in (data or {}).get("children", []):
        register_pid(c["pid"])
    return data


def state(pid):
    """The kernel's view of a process: 'gone', 'zombie' or 'alive'."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("State:"):
                    return "zombie" if "Z" in line.split()[1] else "alive"
    except (FileNotFoundError, ProcessLookupError):
        pass                     # ESRCH: read while its parent reaps it (at once now, through a pidfd)
    return "gone"


def wait_dead(pid, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state(pid) != "alive":
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def one_child(kc):
    """Forks the kernel behind kc into one child and yields a client of the child; the child is ended after."""
    data = fork(kc, n=1)
    assert data["status"] == "ok", data
    child = data["children"][0]
    ckc = connect_client(child["connection_file"])
    try:
        yield ckc
    finally:
        ckc.stop_channels()
        kill_pid(child["pid"])


@pytest.fixture
def forked(fresh_kernel):
    """A fresh kernel with state, forked into three children; clients for the children."""
    kc = fresh_kernel.kc
    execute(kc, "import json\nshared = {'a': [1, 2, 3]}\nx = 10")
    data = fork(kc, n=3)
    assert data["status"] == "ok", data
    clients = [connect_client(c["connection_file"]) for c in data["children"]]
    yield fresh_kernel, data["children"], clients
    for c in clients:
        c.stop_channels()
    for c in data["children"]:
        kill_pid(c["pid"])


def test_children_start_from_parent_state_and_are_isolated(forked):
    k, children, clients = forked
    assert len({c["pid"] for c in children}) == 3
    assert all(c["pid"] != k.pid for c in children)
    for i, kc in enumerate(clients):
        # variables and modules of the parent are there
        assert eval_value(kc, "shared['a'], x, json.dumps(1)") == "([1, 2, 3], 10, '1')"
        reply, _ = execute(kc, "x += %d\nshared['a'].append(%d)" % (i + 1, i))
        assert reply["content"]["status"] == "ok"
    # a change in one child is invisible to the parent and the siblings
    assert eval_value(k.kc, "x, shared['a']") == "(10, [1, 2, 3])"
    for i, kc in enumerate(clients):
        assert eval_value(kc, "x, shared['a']") == "(%d, [1, 2, 3, %d])" % (10 + i + 1, i)


def test_child_is_a_full_kernel(forked):
    k, children, clients = forked
    c = children[0]
    info = json.load(open(c["connection_file"]))
    assert oct(os.stat(c["connection_file"]).st_mode & 0o777) == "0o600"
    assert os.path.dirname(c["connection_file"]) == os.path.dirname(k.km.connection_file)
    assert info["key"] != json.load(open(k.km.connection_file))["key"]
    assert info["shell_port"] not in [json.load(open(k.km.connection_file))[p] for p in
                                      ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
    kc = clients[0]
    reply, msgs = execute(kc, "print('from child', os.getpid() if 'os' in dir() else __import__('os').getpid())")
    assert stream_text(msgs) == "from child %d\n" % c["pid"]
    reply, msgs = execute(kc, "1/0")
    assert reply["content"]["ename"] == "ZeroDivisionError"
    assert eval_value(kc, "x") == "10"
    # %connect_info shows the child's own connection, not the parent's it was forked from
    reply, msgs = execute(kc, "%connect_info")
    shown = stream_text(msgs)
    assert '"shell_port": %d' % info["shell_port"] in shown and info["key"] in shown
    assert os.path.basename(c["connection_file"]) in shown
    # its own process group, so an interrupt of the parent's group does not reach it
    assert os.getpgid(c["pid"]) != os.getpgid(k.pid)



def test_a_child_s_kernel_info_is_its_parent_s_with_its_own_checkpoint(tmp_path):
    """A forked session fills in the kernel_info document its parent made (kernelinfo.c) with its own
    checkpoint file; everything else is the same, and the document is valid JSON in both."""
    k = pyctest.Kernel("pyc", env={"PYC_CHECKPOINT_DIR": str(tmp_path / "ck")})
    try:
        parent = request(k.kc, "kernel_info_request")[0]["content"]
        data = fork(k.kc, n=2)
        assert data["status"] == "ok", data
        children = []
        for c in data["children"]:
            kc = connect_client(c["connection_file"])
            try:
                children.append(request(kc, "kernel_info_request")[0]["content"])
            finally:
                kc.stop_channels()
                kill_pid(c["pid"])
        paths = [parent["pyc"]["checkpoint"]] + [c["pyc"]["checkpoint"] for c in children]
        assert all(isinstance(p, str) and p.startswith(str(tmp_path / "ck")) for p in paths), paths
        assert len(set(paths)) == 3, paths
        for c in children:
            assert dict(c, pyc=dict(c["pyc"], checkpoint=None)) == dict(parent, pyc=dict(parent["pyc"], checkpoint=None))
    finally:
        k.shutdown(now=True)


@pytest.mark.skipif(pyctest.UNDER_ASAN, reason="AddressSanitizer handles SIGSEGV itself")
def test_a_segfault_in_a_forked_session_is_reported_by_that_session(fresh_kernel):
    """A forked session has crash reports of its own (its memfd takes the number of the parent's, which Python's
    faulthandler writes to): the cell's client gets KernelDied with the Python traceback; the parent lives on."""
    kc = fresh_kernel.kc
    execute(kc, "import ctypes\ndef crash():\n    return ctypes.string_at(0)")
    with one_child(kc) as ckc:
        msg_id = ckc.execute("crash()")
        reply = pyctest.get_reply(ckc, msg_id, timeout=30)
        assert reply["content"]["ename"] == "KernelDied", reply["content"]
        tb = "\n".join(reply["content"]["traceback"])
        assert "crash" in tb and "string_at" in tb, tb
    assert eval_value(kc, "1 + 1") == "2"


@pytest.mark.skipif(importlib.util.find_spec("IPython") is None, reason="IPython is not installed")
def test_a_fork_keeps_the_in_and_out_of_a_hosted_ipython_shell(fresh_kernel):
    """A kernel prepares its namespace before its first fork (In, Out: what each child would do at its first
    cell), but not over the In and Out of an IPython shell that keeps them already: after the fork, In still
    has the cells the shell recorded, in the kernel and in the child."""
    kc = fresh_kernel.kc
    reply, _ = execute(kc, "import IPython\nget_ipython()", store_history=False)
    assert reply["content"]["status"] == "ok", reply["content"]
    execute(kc, "x = 41")
    execute(kc, "x + 1")
    with one_child(kc) as ckc:
        for c in (kc, ckc):
            assert eval_value(c, "In[-2:], Out.get(len(In) - 1)") == "(['x = 41', 'x + 1'], 42)"


def test_kill_child_leaves_parent_and_siblings(forked):
    k, children, clients = forked
    os.kill(children[0]["pid"], signal.SIGKILL)
    assert wait_dead(children[0]["pid"])
    assert eval_value(k.kc, "x") == "10"
    assert eval_value(clients[1], "x") == "10"


def test_shutdown_of_child_ends_only_that_child(forked):
    k, children, clients = forked
    clients[0].shutdown()
    assert wait_dead(children[0]["pid"])
    assert eval_value(k.kc, "x") == "10"
    assert eval_value(clients[1], "x") == "10"
    # the parent reaps it (no zombie left behind) and its connection file goes
    deadline = time.monotonic() + 5
    while state(children[0]["pid"]) != "gone" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert state(children[0]["pid"]) == "gone"
    assert not os.path.exists(children[0]["connection_file"])


def test_interrupt_of_parent_group_leaves_children(forked):
    k, children, clients = forked
    msg_id = clients[0].execute("import time\nfor _ in range(30):\n    time.sleep(0.1)\nprint('finished')")
    time.sleep(0.5)
    os.killpg(os.getpgid(k.pid), signal.SIGINT)
    reply = clients[0].get_shell_msg(timeout=TIMEOUT)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["status"] == "ok", reply["content"]
    assert eval_value(k.kc, "x") == "10"


def test_parent_shutdown_ends_children(fresh_kernel):
    kc = fresh_kernel.kc
    data = fork(kc, n=2)
    assert data["status"] == "ok"
    pids = [c["pid"] for c in data["children"]]
    fresh_kernel.shutdown()
    for pid in pids:
        assert wait_dead(pid), "child %d outlived its parent" % pid
    for c in data["children"]:
        assert not os.path.exists(c["connection_file"])


def test_outlive(fresh_kernel):
    kc = fresh_kernel.kc
    execute(kc, "y = 'kept'")
    data = fork(kc, n=1, outlive=True)
    child = data["children"][0]
    try:
        fresh_kernel.shutdown()
        time.sleep(0.5)
        assert state(child["pid"]) == "alive"
        ckc = connect_client(child["connection_file"])
        assert eval_value(ckc, "y") == "'kept'"
        ckc.shutdown()
        assert wait_dead(child["pid"])
        ckc.stop_channels()
    finally:
        kill_pid(child["pid"])


def test_parent_reaps_a_child_that_outlives_it_but_ends_first(fresh_kernel):
    kc = fresh_kernel.kc
    child = fork(kc, n=1, outlive=True)["children"][0]
    try:
        os.kill(child["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while state(child["pid"]) != "gone" and time.monotonic() < deadline:
            execute(kc, "1")          # the parent reaps when it is idle
            time.sleep(0.2)
        assert state(child["pid"]) == "gone", "the ended child is left a %s" % state(child["pid"])
    finally:
        kill_pid(child["pid"])


def test_idle_parent_reaps_an_ended_child_at_once(fresh_kernel):
    """A child that ends is reaped, and its connection file removed, while the parent gets no request: the
    parent watches its children's pidfds (it used to look once a second)."""
    kc = fresh_kernel.kc
    child = fork(kc, n=1)["children"][0]
    try:
        time.sleep(0.3)
        os.kill(child["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 3
        while state(child["pid"]) != "gone" and time.monotonic() < deadline:
            time.sleep(0.001)
        assert state(child["pid"]) == "gone", "the ended child is left a %s" % state(child["pid"])
        # at once: the parent removes the file before it reaps the pid, so no one sees the one without the other
        assert not os.path.exists(child["connection_file"])
    finally:
        kill_pid(child["pid"])


def test_bad_requests_and_cap(kc):
    for n in (0, -1, 10_000, "three"):
        data = fork(kc, n=n)
        assert data["status"] == "error" and data["ename"] == "ForkError", data
    # the kernel goes on
    assert eval_value(kc, "1 + 1") == "2"


def test_bad_fork_options_are_refused_before_anything_is_forked(kc, tmp_path):
    info = kc.get_connection_info()
    ports = {p: 1 for p in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")}
    bad = [
        ({"watch": 1}, "watch must be"), ({"watch": "me"}, "watch must be"), ({"watch": 2 ** 29}, "no process"),
        ({"cwd": "relative"}, "absolute path"), ({"cwd": str(tmp_path / "none")}, "not a directory"),
        ({"connection": []}, "must be an object"), ({"connection": {"shell_port": 1}}, "all five ports"),
        ({"n": 2, "connection": ports}, "only for one child"),
        ({"connection": dict(ports, shell_port=70000)}, "from 1 to 65535"),
        ({"connection": {"transport": "ipc"}}, "keeps its parent's transport"),
        ({"connection": {"signature_scheme": "hmac-md5"}}, "keeps its parent's signature_scheme"),
        ({"connection": {"key": 7}}, "key must be a string"), ({"connection": {"ip": ""}}, "ip must be"),
        ({"connection": {"colour": "red"}}, "unknown field colour"),
        ({"spares": 9}, "spares must be"), ({"spares": "two"}, "spares must be"),
    ]
    for more, says in bad:
        n = more.pop("n", 1)
        data = fork(kc, n=n, **more)
        assert data["status"] == "error" and data["ename"] == "ForkError" and says in data["evalue"], (more, data)
        assert "children" not in data
    # What jupyter_client holds of a connection can be given back as it is (transport and scheme the parent's).
    same = {"transport": info["transport"], "signature_scheme": info["signature_scheme"], "kernel_name": "x"}
    data = fork(kc, connection=same)
    assert data["status"] == "ok", data
    kill_pid(data["children"][0]["pid"])
    assert eval_value(kc, "1 + 1") == "2"


def test_fork_with_a_given_connection_watch_and_cwd(fresh_kernel, tmp_path):
    """A template session's fork: the child binds the key and ports it is given, starts in the given working
    directory, outlives its parent, and ends when the watched process does."""
    import subprocess

    kc = fresh_kernel.kc
    import testports

    ports = {name: testports.free_port() for name in ("shell_port", "iopub_port", "stdin_port", "control_port",
                                                      "hb_port")}
    watched = subprocess.Popen(["sleep", "60"])
    register_pid(watched.pid)
    data = None
    try:
        data = fork(kc, watch=watched.pid, cwd=str(tmp_path), connection=dict(ports, ip="127.0.0.1", key="k" * 40))
        assert data["status"] == "ok", data
        child = data["children"][0]
        conn = child["connection"]
        assert {p: conn[p] for p in ports} == ports and conn["key"] == "k" * 40
        fresh_kernel.shutdown()
        time.sleep(0.3)
        assert state(child["pid"]) == "alive", "a watching child ended with its parent"
        ckc = connect_client(child["connection_file"])
        assert eval_value(ckc, "__import__('os').getcwd()") == repr(str(tmp_path))
        ckc.stop_channels()
        watched.kill()
        watched.wait()
        assert wait_dead(child["pid"]), "the child outlived the process it watched"
    finally:
        kill_pid(watched.pid)
        for c in (data or {}).get("children", []):
            kill_pid(c["pid"])


def test_console_existing_on_child(forked):
    pexpect = pytest.importorskip("pexpect")
    from pyctest import PYC_PYTHON, child_env

    k, children, clients = forked
    child = pexpect.spawn(PYC_PYTHON, ["-m", "jupyter_console", "--existing", children[1]["connection_file"],
                                        "--simple-prompt"], env=child_env(), encoding="utf-8", timeout=60)
    try:
        child.expect(r"In \[\d+\]: ")
        child.sendline("x * 3")
        child.expect("30")
        child.expect(r"In \[\d+\]: ")
        child.sendeof()
        if child.expect([r"(?i)really want to exit", pexpect.EOF], timeout=30) == 0:
            child.sendline("y")
            child.expect(pexpect.EOF, timeout=30)
    finally:
        child.close(force=True)
    assert eval_value(clients[1], "x") == "10"


def test_the_reply_names_what_the_children_lack(fresh_kernel):
    """pyc.fork's answer says what the children do not have of the parent, as a snapshot's record does: its other
    threads (and open connections, GPU contexts); nothing when there is nothing to say."""
    kc = fresh_kernel.kc
    data = fork(kc)
    assert data["status"] == "ok" and data["not_carried"] == [], data
    kill_pid(data["children"][0]["pid"])
    execute(kc, "import threading, time\nstop = threading.Event()\n"
                "threading.Thread(target=stop.wait, name='ticker', daemon=True).start()")
    data = fork(kc)
    try:
        assert data["status"] == "ok", data
        lost = data["not_carried"]
        assert len(lost) == 1 and "1 thread other than the main one (ticker)" in lost[0], lost
        assert "not in the forked sessions" in lost[0], lost
    finally:
        kill_pid(data["children"][0]["pid"])
        execute(kc, "stop.set()")


def test_pyc_client_fork(fresh_kernel):
    import sys

    sys.path.insert(0, os.path.join(os.environ.get("PYC_SRCDIR", ""), "cli", "python"))
    import pyc_client

    execute(fresh_kernel.kc, "z = 'from parent'")
    children = pyc_client.fork(fresh_kernel.kc, 2)
    try:
        assert len(children) == 2 and all(c.pyc_not_carried == [] for c in children)
        for c in children:
            register_pid(c.pyc_child["pid"])
            c.wait_for_ready(timeout=TIMEOUT)
            assert eval_value(c, "z") == "'from parent'"
        # objects move between the forks with the pickle transfer
        execute(children[0], "w = [1, 2, 3]")
        pyc_client.copy(children[0], "w", children[1])
        assert eval_value(children[1], "w") == "[1, 2, 3]"
    finally:
        for c in children:
            c.stop_channels()
            kill_pid(c.pyc_child["pid"])


def private_mb(pid):
    """The process's own memory (USS): pages no other process shares."""
    total = 0
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    return total / 1024


@pytest.mark.slow
def test_fork_of_a_big_session_is_copy_on_write(fresh_kernel):
    pytest.importorskip("numpy")
    kc = fresh_kernel.kc
    reply, _ = execute(kc, "import numpy as np\nbig = np.ones(1 << 27)\nbig.nbytes", timeout=120)  # 1 GiB
    assert reply["content"]["status"] == "ok"
    data = fork(kc, n=1)
    child = data["children"][0]
    try:
        ckc = connect_client(child["connection_file"])
        assert eval_value(ckc, "float(big[12345])") == "1.0"
        before = private_mb(child["pid"])
        assert before < 150, "a fresh child of a 1 GiB session owns %.0f MB" % before
        execute(ckc, "big[:] = 2.0", timeout=120)
        after = private_mb(child["pid"])
        assert after > 900, "writing 1 GiB in the child made only %.0f MB its own" % after
        assert eval_value(kc, "float(big.sum())") == str(float(1 << 27))
        ckc.stop_channels()
    finally:
        kill_pid(child["pid"])


@pytest.mark.slow
def test_fork_branches_example_notebook():
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("pandas")
    from nbclient import NotebookClient

    from pyctest import PYC_SRCDIR

    nb = nbformat.read(os.path.join(PYC_SRCDIR, "examples", "fork_branches.ipynb"), as_version=4)
    NotebookClient(nb, kernel_name="pyc", timeout=180).execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outs if o.output_type == "error"], outs
    table = [o for o in outs if "text/html" in o.get("data", {})]
    assert table and "n(x &gt; 1)" in table[-1]["data"]["text/html"]


def end_all(children):
    for c in children:
        kill_pid(c["pid"])


def test_fan_out_of_twenty(fresh_kernel):
    """One request forks 20 children at once (issue 22): each answers kernel_info on its own ports, has the
    parent's state, and is independent of its siblings."""
    from jupyter_client.session import Session
    import zmq

    kc = fresh_kernel.kc
    execute(kc, "v = ['parent']")
    t0 = time.monotonic()
    data = fork(kc, n=20)
    took = time.monotonic() - t0
    children = data.get("children", [])
    try:
        assert data["status"] == "ok" and len(children) == 20, data
        assert len({c["pid"] for c in children}) == 20
        assert took < 10, "the fan-out of 20 took %.1f s" % took
        # every child serves its shell already: kernel_info from all of them, asked at once
        ctx = zmq.Context.instance()
        socks = []
        for c in children:
            info = c["connection"]
            sock = ctx.socket(zmq.DEALER)
            sock.connect("tcp://%s:%d" % (info["ip"], info["shell_port"]))
            Session(key=info["key"].encode()).send(sock, "kernel_info_request", {})
            socks.append(sock)
        for sock in socks:
            assert sock.poll(TIMEOUT * 1000), "a child did not answer kernel_info"
            assert b"kernel_info_reply" in b"".join(sock.recv_multipart())
            sock.close(0)
        # the parent's state, and a change in one is seen in no other
        first, second = (connect_client(c["connection_file"]) for c in children[:2])
        try:
            assert eval_value(first, "v") == "['parent']"
            execute(first, "v.append('first')")
            assert eval_value(first, "v") == "['parent', 'first']"
            assert eval_value(second, "v") == "['parent']"
            assert eval_value(kc, "v") == "['parent']"
        finally:
            first.stop_channels()
            second.stop_channels()
    finally:
        end_all(children)
    for c in children:
        assert wait_dead(c["pid"])


def test_fan_out_that_partly_fails_says_which():
    """Children that cannot bind their ports (a port range of 12 ports holds two children's five) are
    reported as failed, the others as started, without hanging."""
    import testports

    base = testports.free_run(12)       # this worker's ports: no other process of the run takes them meanwhile
    from pyctest import Kernel

    k = Kernel("pyc", env={"PYC_PORT_RANGE": "%d-%d" % (base, base + 11)})
    t0 = time.monotonic()
    data = fork(k.kc, n=6)
    children = data.get("children", [])
    try:
        assert time.monotonic() - t0 < 15
        assert data["status"] == "error" and data["ename"] == "ForkError", data
        assert 1 <= len(data["failed"]) and len(children) + len(data["failed"]) == 6, data
        assert len(children) <= 2, data
        assert "did not start" in data["evalue"] and all(f["error"] for f in data["failed"]), data
        for c in children:
            ckc = connect_client(c["connection_file"])
            assert eval_value(ckc, "1 + 1") == "2"
            ckc.stop_channels()
        for f in data["failed"]:
            if "pid" in f:
                assert wait_dead(f["pid"])
        assert eval_value(k.kc, "2 + 2") == "4"
    finally:
        end_all(children)
        k.shutdown(now=True)


def children_of(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return {int(p) for p in f.read().split()}


def test_spares_are_handed_over_and_never_stale(fresh_kernel, tmp_path):
    """{"spares": K}: the kernel keeps K children forked ahead of the requests (they do not serve until handed
    a request); a fork of one child then takes one over, in the request's working directory; a request that
    may change the state (a cell) drops them, so a fork after it has that state, never the one before."""
    kc, pid = fresh_kernel.kc, fresh_kernel.pid
    execute(kc, "x = 1")
    data = fork(kc, spares=2, not_carried=False)
    assert data["status"] == "ok" and "not_carried" not in data
    first = data["children"][0]["pid"]
    deadline = time.monotonic() + 10
    while len(children_of(pid) - {first}) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    spares = children_of(pid) - {first}
    assert len(spares) == 2, spares
    data = fork(kc, cwd=str(tmp_path))
    assert data["status"] == "ok", data
    taken = data["children"][0]
    assert taken["pid"] in spares
    ckc = connect_client(taken["connection_file"])
    assert eval_value(ckc, "x, __import__('os').getcwd()") == repr((1, str(tmp_path)))
    ckc.stop_channels()
    # A cell in the parent: the spares forked before it are dropped, and the next fork has x == 2.
    execute(kc, "x = 2")
    data = fork(kc)
    child = data["children"][0]
    assert child["pid"] not in spares
    ckc = connect_client(child["connection_file"])
    assert eval_value(ckc, "x") == "2"
    ckc.stop_channels()
    for p in spares - {taken["pid"]}:
        assert wait_dead(p), "a stale spare lives on"
    # Spares not handed over end with their parent; so do the sessions made from them (not outliving it).
    left = children_of(pid)
    assert len(left) >= 2, left                  # the spares forked anew after the cell
    for p in left:
        register_pid(p)
    base = fresh_kernel.km.connection_file[:-len(".json")]
    files = {p: base + "-fork-%d.json" % p for p in left}
    assert any(os.path.exists(f) for f in files.values())
    fresh_kernel.shutdown()
    for p in left:
        assert wait_dead(p), "child %d outlived its parent" % p
    # and their connection files went with them, the spares' (never handed a request) too
    deadline = time.monotonic() + 5
    while any(os.path.exists(f) for f in files.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [f for f in files.values() if os.path.exists(f)]
