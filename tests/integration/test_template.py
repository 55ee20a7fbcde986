"""Kernels from a warm template (pyc_client's pyc-template-provisioner, README "Kernels from a warm template")
through jupyter_client's own KernelManager: each start forks a session from a template kernel that ran its
start-up code once; sessions are full kernels of their own (state, key, ports, process), are interrupted,
restarted in place (same ports and key, fresh state) and shut down as any kernel, end with their manager's
process, and go on serving when the template dies, which the next start replaces.

pyc only.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest
from jupyter_client.manager import KernelManager

import pyctest
from pyctest import PYC_KERNEL, TIMEOUT, execute, pyc_only, result_text

pytestmark = pyc_only

PRELOAD = "import decimal, fractions\nPRELOADED = 42"


def runtime_dir():
    from jupyter_core.paths import jupyter_runtime_dir

    return jupyter_runtime_dir()


def templates(name):
    """{record path: record} of the live and dead templates of kernelspec name in the runtime dir."""
    out = {}
    prefix = "pyctemplate-%s-" % name
    for entry in os.listdir(runtime_dir()):
        if entry.startswith(prefix) and entry.endswith(".json") and len(entry) == len(prefix) + 21:
            with open(os.path.join(runtime_dir(), entry)) as f:
                out[entry] = json.load(f)
    return out


@pytest.fixture
def spec():
    """A kernelspec of its own for each test (so each test has its own template): its name.  At the end every
    template of it and every session forked from one is ended, by pid."""
    name = "tmpl-" + uuid.uuid4().hex[:8]
    made = []

    def make(preload=PRELOAD, env=None, program=PYC_KERNEL):
        kdir = os.path.join(os.environ["JUPYTER_PATH"].split(os.pathsep)[0], "kernels", name)
        os.makedirs(kdir, exist_ok=True)
        with open(os.path.join(kdir, "kernel.json"), "w") as f:
            json.dump({"argv": [program, "-f", "{connection_file}"], "display_name": "pyc template",
                       "language": "python", "interrupt_mode": "signal", "env": env or {},
                       "metadata": {"kernel_provisioner": {"provisioner_name": "pyc-template-provisioner",
                                                           "config": {"template": name, "preload": preload}}}},
                      f)
        return name

    make.managers = made
    yield make
    for m in made:
        if m.has_kernel:
            try:
                m.shutdown_kernel(now=True)
            except Exception:
                pass
    for record in templates(name).values():
        pyctest.kill_pid(record["pid"])


def fork_files(name):
    """{file name: pid} of the connection files of sessions and spares forked from templates of kernelspec
    name, in the runtime dir."""
    out = {}
    for entry in os.listdir(runtime_dir()):
        m = re.fullmatch(r"pyctemplate-%s-[0-9a-f]{16}-registration-fork-([0-9]+)\.json" % re.escape(name), entry)
        if m:
            out[entry] = int(m.group(1))
    return out


def start(spec, managers=None, **kw):
    """A started KernelManager of the kernelspec (put in managers first, for the fixture to end), and a client
    that has had kernel_info."""
    m = KernelManager(kernel_name=spec)
    if managers is not None:
        managers.append(m)
    m.start_kernel(**kw)
    pyctest.register_pid(m.provisioner.pid)
    kc = m.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=TIMEOUT)
    return m, kc


def value(kc, code):
    reply, msgs = execute(kc, code)
    assert reply["content"]["status"] == "ok", reply["content"]
    return result_text(msgs)


def test_sessions_are_kernels_of_their_own_forked_from_the_warm_template(spec, tmp_path):
    name = spec()
    m1, kc1 = start(name, cwd=str(tmp_path))
    spec.managers.append(m1)
    try:
        (record,) = templates(name).values()
        assert pyctest.pid_alive(record["pid"]) and m1.provisioner.pid != record["pid"]
        # The template's imports and names are there, and nothing was imported again.
        assert value(kc1, "import sys; ('decimal' in sys.modules, PRELOADED)") == "(True, 42)"
        assert value(kc1, "import os; os.getcwd()") == repr(str(tmp_path))
        assert value(kc1, "os.getpid()") == str(m1.provisioner.pid)
        value(kc1, "x = 1")
        m2, kc2 = start(name)
        spec.managers.append(m2)
        try:
            assert len(templates(name)) == 1             # the same template
            info1, info2 = m1.get_connection_info(), m2.get_connection_info()
            assert info1["key"] != info2["key"] and info1["shell_port"] != info2["shell_port"]
            assert m1.provisioner.pid != m2.provisioner.pid
            reply, msgs = execute(kc2, "x", check=False)
            assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "NameError"
            # Each session's connection file is jupyter_client's, with the session's own connection.
            with open(m2.connection_file) as f:
                assert json.load(f)["shell_port"] == info2["shell_port"]
        finally:
            kc2.stop_channels()
            m2.shutdown_kernel(now=False)
            assert not pyctest.pid_alive(m2.provisioner.pid or 0)
        assert value(kc1, "x") == "1"                    # the other session is untouched
    finally:
        kc1.stop_channels()


def test_interrupt_and_restart_in_place(spec):
    name = spec()
    m, kc = start(name)
    spec.managers.append(m)
    try:
        value(kc, "x = 1")
        msg_id = kc.execute("import time; time.sleep(30)")
        pyctest.wait_running(kc, msg_id)
        m.interrupt_kernel()
        reply = pyctest.get_reply(kc, msg_id)
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
        before, old_pid = m.get_connection_info(), m.provisioner.pid
        t0 = time.monotonic()
        m.restart_kernel(now=False)
        restart_s = time.monotonic() - t0
        assert not pyctest.pid_alive(old_pid)
        new_pid = m.provisioner.pid
        pyctest.register_pid(new_pid)
        assert new_pid != old_pid
        # The same address, key and ports: the client from before the restart goes on as it was.
        after = m.get_connection_info()
        assert {k: after[k] for k in before} == before
        kc.wait_for_ready(timeout=TIMEOUT)
        reply, msgs = execute(kc, "x", check=False)
        assert reply["content"]["ename"] == "NameError"
        assert value(kc, "PRELOADED") == "42"
        assert restart_s < TIMEOUT
    finally:
        kc.stop_channels()



def test_a_session_ends_as_a_kernel_does(spec, tmp_path):
    """A session ends with _exit, without the teardown of every module (most of a restart's time), but keeps
    what a user sees of an interpreter's end: non-daemon threads finish, atexit handlers run, and the
    namespace's values are let go, so that a file written and never closed is flushed."""
    name = spec()
    m, kc = start(name)
    spec.managers.append(m)
    marks = {k: tmp_path / k for k in ("atexit", "thread", "unclosed", "finalizer", "result", "cycle")}
    try:
        value(kc, "import atexit, threading, time\n"
                  "atexit.register(lambda: open(%r, 'w').write('ran'))\n"
                  "def late():\n    time.sleep(0.5)\n    open(%r, 'w').write('joined')\n"
                  "threading.Thread(target=late).start()\n"
                  "f = open(%r, 'w')\nf.write('kept')\n"
                  "class Bye:\n    def __del__(self):\n        open(%r, 'w').write('gone')\n"
                  "b = Bye()\nNone" % tuple(str(marks[k]) for k in ("atexit", "thread", "unclosed", "finalizer")))
        # A file that is a cell's result (held by Out and _ too), and an object held only by a cycle (the
        # collector is off, so that only the end's collection finds it).
        value(kc, "g = open(%r, 'w')\ng" % str(marks["result"]))
        # (An object whose finalizer writes, not a file: CPython may lose a file's buffer when the file is
        # collected in a cycle, bpo-17852, with or without pyc.)
        value(kc, "g.write('held')\nclass Loop:\n    def __del__(self):\n        open(%r, 'w').write('cycle')\n"
                  "loop = Loop()\nloop.me = loop\ndel loop\nimport gc\ngc.disable()\nNone" % str(marks["cycle"]))
        pid = m.provisioner.pid
    finally:
        kc.stop_channels()
    m.shutdown_kernel(now=False)
    assert not pyctest.pid_alive(pid)
    assert {k: p.read_text() if p.exists() else None for k, p in marks.items()} == {
        "atexit": "ran", "thread": "joined", "unclosed": "kept", "finalizer": "gone", "result": "held",
        "cycle": "cycle"}


def test_a_kernel_rebuilt_or_upgraded_in_place_gets_a_new_template(spec, tmp_path):
    """The template's fingerprint has the program's file in it, not only its path: after pyc is rebuilt or
    upgraded in place, the next start makes a template of the new program instead of forking the old one."""
    program = tmp_path / "pyc-kernel"
    shutil.copy2(PYC_KERNEL, program)
    name = spec(program=str(program))
    m1, kc1 = start(name, managers=spec.managers)
    kc1.stop_channels()
    (first,) = templates(name)
    st = program.stat()
    os.utime(program, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    m2, kc2 = start(name, managers=spec.managers)
    kc2.stop_channels()
    assert set(templates(name)) - {first}, "the second start forked the template of the old program"
    m2.shutdown_kernel(now=True)
    m1.shutdown_kernel(now=True)

MANAGER = r"""
import json, sys
sys.path[:0] = json.loads(sys.argv[2])
from jupyter_client.manager import KernelManager
m = KernelManager(kernel_name=sys.argv[1])
m.start_kernel()
print(json.dumps({"pid": m.provisioner.pid}), flush=True)
sys.stdin.read()
"""


def test_a_session_ends_with_its_manager_and_outlives_its_template(spec):
    name = spec()
    # The manager's environment is ours (pyc_client comes on its path another way), so that it forks from the
    # same template as we do: a template is shared by the starts of one kernelspec in one environment.
    manager = subprocess.Popen([sys.executable, "-c", MANAGER, name, json.dumps(pyctest.handshake_pythonpath())],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    pyctest.register_pid(manager.pid)
    try:
        session = json.loads(manager.stdout.readline())["pid"]
        pyctest.register_pid(session)
        assert pyctest.pid_alive(session)
        # A session of our own, then the template dies: that session goes on serving.
        m, kc = start(name)
        spec.managers.append(m)
        (record,) = templates(name).values()
        pyctest.kill_pid(record["pid"])
        assert value(kc, "PRELOADED + 1") == "43"
        assert pyctest.pid_alive(session)
        # Its spares die with it (SIGKILL), leaving their connection files behind...
        deadline = time.monotonic() + 10
        while set(fork_files(name).values()) - {session, m.provisioner.pid} and time.monotonic() < deadline:
            if all(not pyctest.pid_alive(p) for p in set(fork_files(name).values()) - {session, m.provisioner.pid}):
                break
            time.sleep(0.02)
        # ... which the next start removes when it replaces the template.
        m2, kc2 = start(name)
        spec.managers.append(m2)
        (record2,) = templates(name).values()
        assert record2["pid"] != record["pid"] and pyctest.pid_alive(record2["pid"])
        assert all(pyctest.pid_alive(p) for p in fork_files(name).values()), fork_files(name)
        assert value(kc2, "PRELOADED") == "42"
        kc2.stop_channels()
        kc.stop_channels()
        # The manager's process ends without a word: its session ends too.
        manager.kill()
        manager.wait()
        deadline = time.monotonic() + 10
        while pyctest.pid_alive(session) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not pyctest.pid_alive(session)
    finally:
        pyctest.kill_pid(manager.pid)


def test_limits_hold_in_a_session(spec):
    name = spec(env={"PYC_CELL_TIMEOUT": "1"})
    m, kc = start(name)
    spec.managers.append(m)
    try:
        reply, msgs = execute(kc, "import time; time.sleep(20)", check=False)
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "CellTimeout"
        assert reply["metadata"]["pyc"]["outcome"] == "timeout", reply["metadata"]
        assert value(kc, "PRELOADED") == "42"
    finally:
        kc.stop_channels()


def test_a_failing_start_up_code_is_the_start_error(spec):
    name = spec(preload="import decimal\n1/0")
    m = KernelManager(kernel_name=name)
    spec.managers.append(m)
    with pytest.raises(Exception) as e:
        m.start_kernel()
    assert "ZeroDivisionError" in str(e.value) and "start-up code failed" in str(e.value)
    assert all(not pyctest.pid_alive(r["pid"]) for r in templates(name).values())


def test_install_template_writes_a_kernelspec_that_starts_template_sessions(spec):
    name = "tmpl-" + uuid.uuid4().hex[:8]
    p = subprocess.run([PYC_KERNEL, "install", "--user", "--no-env", "--template", name, "--preload",
                        "import decimal\nINSTALLED = 'yes'"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    from jupyter_client.kernelspec import KernelSpecManager

    kspec = KernelSpecManager().get_kernel_spec(name)
    assert kspec.metadata["kernel_provisioner"] == {
        "provisioner_name": "pyc-template-provisioner",
        "config": {"template": name, "preload": "import decimal\nINSTALLED = 'yes'"}}
    m, kc = start(name, spec.managers)
    try:
        assert value(kc, "INSTALLED") == "'yes'"
    finally:
        kc.stop_channels()
        m.shutdown_kernel(now=True)
        for record in templates(name).values():
            pyctest.kill_pid(record["pid"])


@pytest.mark.parametrize("args, says", [
    (["--preload", "import os"], "--preload is the start-up code of a --template"),
    (["--template", "t", "--handshake"], "choose one"),
    (["--template", "no/slash"], "a template's name is"), (["--template", "Upper"], "a template's name is"),
])
def test_install_template_refuses_what_cannot_work(args, says, tmp_path):
    p = subprocess.run([PYC_KERNEL, "install", "--prefix", str(tmp_path), "--no-env"] + args, capture_output=True,
                       text=True)
    assert p.returncode != 0 and says in p.stderr, p.stderr
    assert not (tmp_path / "share").exists()


def test_pyc_new_from_a_live_template(spec):
    """`pyc new NAME --from TEMPLATE`: a named session forked from the live template of kernelspec TEMPLATE,
    with its start-up code's work done; it outlives the template."""
    name = spec()
    m, kc = start(name)
    spec.managers.append(m)
    kc.stop_channels()
    cli = os.path.join(os.path.dirname(PYC_KERNEL), "pyc")
    session = "s-" + uuid.uuid4().hex[:8]
    p = subprocess.run([cli, "new", session, "--from", name, "--json"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    pid = json.loads(p.stdout)["pid"]
    pyctest.register_pid(pid)
    try:
        (record,) = templates(name).values()
        assert pid != record["pid"]
        p = subprocess.run([cli, "run", session, "PRELOADED, 'fractions' in __import__('sys').modules"],
                           capture_output=True, text=True, timeout=60)
        assert (p.returncode, p.stdout) == (0, "(42, True)\n"), p.stderr
        # `pyc ls` lists the session, not the template or its other sessions and spares.
        listed = [e["name"] for e in json.loads(subprocess.run([cli, "ls", "--json"], capture_output=True,
                                                                text=True, timeout=60).stdout)]
        assert session in listed and not [n for n in listed if "template" in n or "fork" in n], listed
        pyctest.kill_pid(record["pid"])
        p = subprocess.run([cli, "run", session, "PRELOADED + 1"], capture_output=True, text=True, timeout=60)
        assert (p.returncode, p.stdout) == (0, "43\n"), p.stderr
    finally:
        subprocess.run([cli, "kill", session], capture_output=True, timeout=60)
        pyctest.kill_pid(pid)


def test_a_start_storm_from_threads_makes_one_template_and_distinct_sessions(spec):
    """Eight KernelManagers started at once from eight threads of one process (as a server or a test harness
    does): one template is started (the others wait for it), every start gets a session of its own, and
    each answers."""
    import threading

    name = spec()
    results = [None] * 8

    def one(i):
        try:
            m, kc = start(name, spec.managers)
            try:
                results[i] = (m.provisioner.pid, value(kc, "PRELOADED"))
            finally:
                kc.stop_channels()
        except Exception as e:  # noqa: BLE001 -- reported below, per thread
            results[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(isinstance(r, tuple) for r in results), results
    assert len({pid for pid, _ in results}) == 8 and {v for _, v in results} == {"42"}
    assert len(templates(name)) == 1
