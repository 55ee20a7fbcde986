"""Shared helpers for the pyc pytest suites (tests/integration and tests/clients).

The suites drive a kernel through real Jupyter clients.  By default the kernel under test is the built
pyc-kernel named by $PYC_KERNEL; setting $PYC_TEST_ARGV to a JSON list runs the very same suites against
another kernel (e.g. ipykernel) so that the expectations can be calibrated against the reference:

    PYC_TEST_ARGV='["/usr/bin/python3","-m","ipykernel_launcher","-f","{connection_file}"]'

Tests of behaviour that only pyc promises (log lines on stderr, exit codes of pyc-kernel, JPY_PARENT_PID,
implementation "pyc") skip when the kernel under test is not pyc.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from queue import Empty

import pytest

# ---- configuration ----------------------------------------------------------------------------------------

PYC_KERNEL = os.environ.get("PYC_KERNEL", "")
PYC_PYTHON = os.environ.get("PYC_PYTHON") or sys.executable
PYC_SRCDIR = os.environ.get("PYC_SRCDIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TEST_ARGV = os.environ.get("PYC_TEST_ARGV", "").strip()

#: True when the kernel under test is pyc (no PYC_TEST_ARGV override).
IS_PYC = not _TEST_ARGV

#: Default time (seconds) to wait for one reply or for the end of one request's output.
TIMEOUT = float(os.environ.get("PYC_TEST_TIMEOUT", "30"))

NOT_PYC_REASON = "pyc-only: the kernel under test is not pyc (PYC_TEST_ARGV is set)"
ISSUE3 = "issue 3: display/completion/inspection/history/clear_output/pager are not in the kernel-core issue"

pyc_only = pytest.mark.skipif(not IS_PYC, reason=NOT_PYC_REASON)

#: The kernelspec of ipykernel in the isolated Jupyter dirs (setup_environment), for tests that compare.
REFERENCE_KERNEL = "pyc-reference-ipykernel"


def reference_installed():
    """True when the interpreter the tests start kernels with ($PYC_PYTHON) has ipykernel."""
    if "installed" not in _reference:
        r = subprocess.run([PYC_PYTHON, "-c", "import ipykernel_launcher"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _reference["installed"] = r.returncode == 0
    return _reference["installed"]

# A test of behaviour that pyc promises and ipykernel lacks: it must pass against pyc and fail against
# ipykernel (strict), which checks that the test can fail.
ipykernel_falls_short = pytest.mark.xfail(not IS_PYC, strict=True, reason="ipykernel falls short here")

_REFERENCE_PROBE = ("import importlib.metadata as m, sys\n"
                    "def v(name):\n"
                    "    try:\n"
                    "        return m.version(name)\n"
                    "    except Exception:\n"
                    "        return ''\n"
                    "print(v('ipykernel')); print(v('ipython')); print('%d.%d.%d' % sys.version_info[:3])")
_reference = {}


def reference_version(name):
    """The version of "ipykernel", "ipython" or "python" in the interpreter that $PYC_TEST_ARGV starts (the
    reference kernel's), as a tuple of ints; None when the kernel under test is pyc, or the version cannot be
    told (a kernel that is no Python).  Read once: in this process when the reference runs on this
    interpreter, from a run of that interpreter otherwise."""
    if IS_PYC:
        return None
    if not _reference:
        exe = kernel_argv_template()[0]
        lines = []
        if os.path.realpath(exe) == os.path.realpath(sys.executable):
            import importlib.metadata

            for dist in ("ipykernel", "ipython"):
                try:
                    lines.append(importlib.metadata.version(dist))
                except importlib.metadata.PackageNotFoundError:
                    lines.append("")
            lines.append("%d.%d.%d" % sys.version_info[:3])
        elif os.path.basename(exe).startswith("python"):
            try:
                lines = subprocess.run([exe, "-c", _REFERENCE_PROBE], capture_output=True, text=True,
                                       timeout=60).stdout.splitlines()
            except (OSError, subprocess.SubprocessError):
                pass
        for key, text in zip(("ipykernel", "ipython", "python"), lines + [""] * 3):
            nums = re.findall(r"\d+", text)[:3]
            _reference[key] = tuple(int(n) for n in nums) if nums else None
    return _reference.get(name.lower())


def ipykernel_falls_short_before(version):
    """ipykernel_falls_short against an ipykernel older than `version` (a tuple: (7, 0)), which gained then
    what the test checks; a reference of unknown version is taken to fall short."""
    have = reference_version("ipykernel")
    return pytest.mark.xfail(not IS_PYC and (have is None or have < tuple(version)), strict=True,
                             reason="ipykernel before %s falls short here" % ".".join(map(str, version)))


def ipykernel_falls_short_if(condition, reason):
    """ipykernel_falls_short where the reference falls short only under a condition of its versions
    (reference_version), e.g. from a Python version on."""
    return pytest.mark.xfail(not IS_PYC and bool(condition), strict=True, reason=reason)

# True in the sanitizer build (tests/env.am sends every process's reports to PYC_SANITIZER_LOGS).
UNDER_ASAN = bool(os.environ.get("PYC_SANITIZER_LOGS"))
issue3 = pytest.mark.xfail(IS_PYC, reason=ISSUE3, strict=False)


def kernel_argv_template():
    """The argv of the kernelspecs, with the literal "{connection_file}" placeholder."""
    if _TEST_ARGV:
        argv = json.loads(_TEST_ARGV)
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise ValueError("PYC_TEST_ARGV must be a JSON list of strings")
        return argv
    if not PYC_KERNEL:
        raise RuntimeError("set PYC_KERNEL (path of pyc-kernel) or PYC_TEST_ARGV (JSON argv list)")
    return [PYC_KERNEL, "-f", "{connection_file}"]


def child_env(**extra):
    """The environment for processes the tests start.  PYTEST_CURRENT_TEST is dropped: ipykernel turns its
    fd-level output capture off when it sees it, and no kernel should behave differently under pytest."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(extra)
    return env


def kernel_argv(connection_file):
    return [a.replace("{connection_file}", connection_file) for a in kernel_argv_template()]


# ---- isolated Jupyter environment -------------------------------------------------------------------------

_ENV_ROOT = None


def env_root():
    """The per-session temp dir that holds the isolated Jupyter/IPython dirs and kernel logs."""
    assert _ENV_ROOT is not None, "setup_environment() has not run"
    return _ENV_ROOT


def handshake_pythonpath(root=None):
    """The directories a launcher's Python needs on its path for the pyc-handshake kernelspec: pyc_client, and
    the entry point of its provisioner (give them as PYTHONPATH to a jupyter_server the tests start)."""
    return [os.path.join(PYC_SRCDIR, "cli", "python"), os.path.join(root or env_root(), "site")]


#: The start-up code of the pyc-template kernelspec's template.
TEMPLATE_PRELOAD = "import decimal, fractions\nPRELOADED = 42"


def setup_environment():
    """Point every Jupyter/IPython dir (and HOME) at fresh temp dirs and write the `pyc` and `pyc-msg`
    kernelspecs there.  Called once per pytest session from conftest.py."""
    global _ENV_ROOT
    if _ENV_ROOT is not None:
        return _ENV_ROOT
    root = tempfile.mkdtemp(prefix="pyc-tests-")
    dirs = {
        "JUPYTER_PATH": os.path.join(root, "jupyter-path"),
        "JUPYTER_RUNTIME_DIR": os.path.join(root, "runtime"),
        "JUPYTER_DATA_DIR": os.path.join(root, "data"),
        "JUPYTER_CONFIG_DIR": os.path.join(root, "config"),
        "IPYTHONDIR": os.path.join(root, "ipython"),
        "HOME": os.path.join(root, "home"),
    }
    for var, path in dirs.items():
        os.makedirs(path, exist_ok=True)
        os.environ[var] = path
    os.makedirs(os.path.join(root, "logs"), exist_ok=True)
    # Keep the user's site-packages and any stray config out of the kernels we start.
    os.environ.pop("JUPYTER_CONFIG_PATH", None)
    os.environ["PYTHONNOUSERSITE"] = "1"
    argv = kernel_argv_template()
    for name, mode in (("pyc", "signal"), ("pyc-msg", "message")):
        kdir = os.path.join(dirs["JUPYTER_PATH"], "kernels", name)
        os.makedirs(kdir, exist_ok=True)
        spec = {
            "argv": argv,
            "display_name": "Python 3 (pyc)" if name == "pyc" else "Python 3 (pyc, message interrupts)",
            "language": "python",
            "interrupt_mode": mode,
            "metadata": {},
        }
        with open(os.path.join(kdir, "kernel.json"), "w") as f:
            json.dump(spec, f, indent=1)
    # The reference kernel, ipykernel, for the tests that run each case on pyc and on it in the same test
    # (reference_kernel); written whether or not ipykernel is installed, which those tests find out.
    kdir = os.path.join(dirs["JUPYTER_PATH"], "kernels", REFERENCE_KERNEL)
    os.makedirs(kdir, exist_ok=True)
    with open(os.path.join(kdir, "kernel.json"), "w") as f:
        json.dump({"argv": [PYC_PYTHON, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                   "display_name": "Python 3 (ipykernel, the reference)", "language": "python",
                   "interrupt_mode": "signal", "metadata": {}}, f, indent=1)
    if IS_PYC:
        # `pyc-kernel install --handshake`'s kernelspec, and the entry point `make install` writes beside the
        # pyc_client package, which jupyter_client finds on sys.path (here and in processes the tests start).
        kdir = os.path.join(dirs["JUPYTER_PATH"], "kernels", "pyc-handshake")
        os.makedirs(kdir, exist_ok=True)
        spec = {"argv": argv, "display_name": "Python 3 (pyc, handshake)", "language": "python",
                "interrupt_mode": "signal", "kernel_protocol_version": "5.6",
                "metadata": {"kernel_provisioner": {"provisioner_name": "pyc-handshake-provisioner", "config": {}}}}
        with open(os.path.join(kdir, "kernel.json"), "w") as f:
            json.dump(spec, f, indent=1)
        # `pyc-kernel install --template pyc-template --preload TEMPLATE_PRELOAD`'s kernelspec.
        kdir = os.path.join(dirs["JUPYTER_PATH"], "kernels", "pyc-template")
        os.makedirs(kdir, exist_ok=True)
        spec = dict(spec, display_name="Python 3 (pyc, template)",
                    metadata={"kernel_provisioner": {"provisioner_name": "pyc-template-provisioner",
                                                     "config": {"template": "pyc-template",
                                                                "preload": TEMPLATE_PRELOAD}}})
        with open(os.path.join(kdir, "kernel.json"), "w") as f:
            json.dump(spec, f, indent=1)
        for path in handshake_pythonpath(root):
            if path not in sys.path:
                sys.path.insert(0, path)
        from pyc_client._provisioner import write_dist_info
        write_dist_info(os.path.join(root, "site"))
    _ENV_ROOT = root
    return root


# ---- processes --------------------------------------------------------------------------------------------

#: Every pid a test started (kernels, helper processes).  conftest.py checks at the end of the session that
#: none is still alive.
STARTED_PIDS = set()


def register_pid(pid):
    if pid:
        STARTED_PIDS.add(int(pid))
    return pid


def pid_alive(pid):
    """True if the process exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        return True
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X")


def reap(pid):
    """Collect the exit status of a child we started, if it is one of ours and has ended."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    except OSError:
        pass


def kill_pid(pid, sig=signal.SIGKILL, wait=5.0):
    """Kill one process by pid (never by name) and wait until it is gone.  Returns True if it had to be
    killed."""
    if not pid or not pid_alive(pid):
        reap(pid)
        return False
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        reap(pid)
        if not pid_alive(pid):
            return True
        time.sleep(0.02)
    return True


def rss_mb(pid):
    """The resident memory of process pid in MB (VmRSS), 0 when it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0


def children_of(pid):
    """Pids of the direct children of pid (from /proc)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1] == str(pid):
            kids.append(int(entry))
    return kids


def descendants_of(pid):
    out = []
    todo = [pid]
    while todo:
        p = todo.pop()
        for c in children_of(p):
            if c not in out:
                out.append(c)
                todo.append(c)
    return out


def processes_naming(needle):
    """Live processes (other than this one) whose command line or environment contains `needle` (a path the
    processes of a test run name: its runtime dir, a launcher's TMPDIR), for the checks that nothing a run
    started is left: {pid: command line}."""
    found = {}
    raw = needle.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmdline = f.read()
            with open("/proc/%d/environ" % pid, "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if (raw in cmdline or raw in environ) and pid_alive(pid):
            found[pid] = cmdline.replace(b"\0", b" ").decode("utf-8", "replace")[:200]
    return found


def wait_exit(proc, timeout):
    """Wait for a subprocess.Popen to end; returns its exit code or None on timeout."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


# ---- kernels ---------------------------------------------------------------------------------------------

_log_counter = [0]


def new_log_path(tag):
    _log_counter[0] += 1
    return os.path.join(env_root(), "logs", "%s-%d.log" % (tag, _log_counter[0]))


_start_state = {"ok": 0, "broken": ""}


class Kernel:
    """A kernel started with jupyter_client's KernelManager, with its stderr in a file.

    Attributes: km (KernelManager), kc (BlockingKernelClient), pids (every pid this kernel had, across
    restarts), stderr_path.
    """

    def __init__(self, kernel_name="pyc", ready_timeout=30, env=None, extra_arguments=None, **km_kwargs):
        from jupyter_client.manager import KernelManager

        self.kernel_name = kernel_name
        self.env_extra = dict(env or {})
        self.extra_arguments = list(extra_arguments or [])
        self.stderr_path = new_log_path("kernel-stderr")
        self.stdout_path = self.stderr_path.replace("stderr", "stdout")
        self.pids = []
        self.km = KernelManager(kernel_name=kernel_name, **km_kwargs)
        self.kc = None
        self._info = None
        if _start_state["broken"] and not _start_state["ok"]:
            # no kernel of this session ever started: fail fast instead of waiting again in every test
            raise RuntimeError("no kernel has started in this session; the first failure was:\n" + _start_state["broken"])
        # A kernel that jupyter_client gives fixed ports can find one taken: the client picks free ports, closes
        # them, and writes them down, and another process of the run (the other xdist worker's kernels and
        # servers, a test's outgoing connections) may bind one before the kernel does.  That race is the
        # client's, the same for every kernel (pyc's handshake kernelspec closes it, test_handshake.py), so a
        # start that lost it is tried again on new ports, from a new KernelManager.
        for attempt in range(3):
            seen = len(self.stderr_lines())
            try:
                self._start(ready_timeout)
                break
            except BaseException as e:
                lost_race = any("Address already in use" in line for line in self.stderr_lines()[seen:])
                self.shutdown(now=True)
                if lost_race and attempt < 2 and isinstance(e, Exception):
                    self.km = KernelManager(kernel_name=kernel_name, **km_kwargs)
                    self.kc = None
                    continue
                lines = self.stderr_lines()
                # The last line of the kernel's stderr goes in the first line of the message, which is all that
                # pytest's summary (and CI's) shows of a failure.
                msg = "kernel %r did not start: %s: %s (its stderr ends: %r)\n--- its stderr ---\n%s" % (
                    kernel_name,
                    type(e).__name__,
                    e,
                    lines[-1][:200] if lines else "",
                    "\n".join(lines[-20:]),
                )
                if not _start_state["broken"]:
                    _start_state["broken"] = msg
                raise RuntimeError(msg) from e
        _start_state["ok"] += 1

    def _launch_kwargs(self):
        for fh in (getattr(self, "_err", None), getattr(self, "_out", None)):
            if fh is not None:
                fh.close()
        self._err = open(self.stderr_path, "ab")
        self._out = open(self.stdout_path, "ab")
        return dict(stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err, env=child_env(**self.env_extra),
                    extra_arguments=self.extra_arguments)

    def _record_pid(self):
        pid = self.pid
        if pid and pid not in self.pids:
            self.pids.append(pid)
            register_pid(pid)

    def _start(self, ready_timeout):
        self.km.start_kernel(**self._launch_kwargs())
        self._record_pid()
        self._connect(ready_timeout)

    def _connect(self, ready_timeout):
        self.kc = self.km.client()
        self.kc.start_channels()
        wait_ready(self.kc, ready_timeout, alive=self.km.is_alive)

    @property
    def pid(self):
        prov = getattr(self.km, "provisioner", None)
        proc = getattr(prov, "process", None) if prov is not None else None
        return proc.pid if proc is not None else None

    @property
    def process(self):
        prov = getattr(self.km, "provisioner", None)
        return getattr(prov, "process", None) if prov is not None else None

    def is_alive(self):
        return self.km.is_alive()

    def kernel_info(self, timeout=TIMEOUT):
        if self._info is None:
            reply, _ = request(self.kc, "kernel_info_request", {}, timeout=timeout)
            self._info = reply["content"]
        return self._info

    def require_pyc(self):
        """Skip the calling test unless the kernel under test is pyc."""
        if not IS_PYC:
            pytest.skip(NOT_PYC_REASON)
        impl = self.kernel_info().get("implementation")
        if impl != "pyc":
            pytest.skip("pyc-only: kernel_info implementation is %r, not 'pyc'" % impl)

    def restart(self, now=False, ready_timeout=30):
        self.kc.stop_channels()
        self.km.restart_kernel(now=now, **self._launch_kwargs())
        self._record_pid()
        self._info = None
        self._connect(ready_timeout)

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def stderr_lines(self):
        return self.stderr().splitlines()

    def wait_stderr(self, predicate, timeout=5.0, start=0):
        """Poll the kernel's stderr until predicate(lines[start:]) is true; returns those lines, or the
        lines seen at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            lines = self.stderr_lines()[start:]
            if predicate(lines) or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)

    def shutdown(self, now=False):
        """Stop the channels, shut the kernel down, and kill every pid it had if one is still alive."""
        try:
            if self.kc is not None:
                self.kc.stop_channels()
        except Exception:
            pass
        proc = self.process
        if now and proc is not None and proc.poll() is None:
            # What shutdown_kernel(now=True) does (SIGKILL to the kernel's process group), then the wait for its
            # end: jupyter_client's own wait looks at the process every 100 ms, and finds it alive the first time.
            try:
                pgid = os.getpgid(proc.pid)
                if pgid == proc.pid:
                    os.killpg(pgid, signal.SIGKILL)     # the group jupyter_client's launch gave the kernel
                else:
                    proc.kill()          # a kernel in a group that is not its own: only it
            except OSError:
                proc.kill()
            try:
                proc.wait(timeout=5)
            except Exception:
                pass
        try:
            if self.km.has_kernel:
                self.km.shutdown_kernel(now=now)
        except Exception:
            pass
        for pid in self.pids:
            kill_pid(pid)
        for fh in (getattr(self, "_err", None), getattr(self, "_out", None)):
            if fh is not None:
                try:
                    fh.close()
                except Exception:
                    pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown(now=True)


# ---- messaging helpers -----------------------------------------------------------------------------------


class Deadline:
    def __init__(self, timeout):
        self.end = time.monotonic() + timeout

    def left(self):
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left


def validate(msg):
    """Check a message against jupyter_kernel_test's schema of messaging spec v5 when it has one for the
    type (aborted replies, which that schema does not know, are checked by the tests themselves)."""
    from jupyter_kernel_test import msgspec_v5

    t = msg["header"]["msg_type"]
    if t == "interrupt_reply" and not IS_PYC:
        # ipykernel 6 echoes the request content (no status) in interrupt_reply
        msgspec_v5.msg_structure_validator.validate(msg)
        return
    if t not in msgspec_v5.schema_fragments:
        msgspec_v5.msg_structure_validator.validate(msg)
        return
    if msg["content"].get("status") == "aborted":
        msgspec_v5.msg_structure_validator.validate(msg)
        return
    msgspec_v5.validate_message(msg, t)


def wait_running(kc, msg_id, timeout=5, settle=1.0):
    """Waits for the execute_input of msg_id, then settle seconds more, so that the cell surely runs (for
    tests that interrupt it).  Returns whether execute_input came within timeout: ipykernel's iopub thread is a
    Python thread, and a C-level loop that holds the GIL (a regex) keeps even execute_input from going out, so
    a caller may go on without it; pyc's iopub thread is C."""
    deadline = time.monotonic() + timeout
    seen = False
    while not seen:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            m = kc.get_iopub_msg(timeout=left)
        except Empty:
            break
        seen = m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "execute_input"
    time.sleep(settle)
    return seen


def get_reply(kc, msg_id, channel="shell", timeout=TIMEOUT):
    """The reply to msg_id on shell or control; other replies are dropped.  A hang fails the test."""
    get = kc.get_shell_msg if channel == "shell" else kc.get_control_msg
    dl = Deadline(timeout)
    while True:
        try:
            msg = get(timeout=dl.left())
        except (Empty, TimeoutError):
            pytest.fail("no %s reply to %s within %ss" % (channel, msg_id, timeout))
        if msg.get("parent_header", {}).get("msg_id") == msg_id:
            validate(msg)
            return msg


def iopub_for(kc, msg_id, timeout=TIMEOUT, check=True):
    """The iopub messages whose parent is msg_id, from the first one up to and including status idle.
    With check, assert that the first is status busy and that no message comes between it and idle that
    is a second busy."""
    dl = Deadline(timeout)
    msgs = []
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=dl.left())
        except (Empty, TimeoutError):
            pytest.fail(
                "iopub: no idle for %s within %ss; got %s" % (msg_id, timeout, [m["msg_type"] for m in msgs])
            )
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        validate(msg)
        msgs.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    if check:
        assert msgs[0]["msg_type"] == "status" and msgs[0]["content"]["execution_state"] == "busy", (
            "first iopub message for the request is not status busy: %r" % summarize(msgs)
        )
        states = [m["content"]["execution_state"] for m in msgs if m["msg_type"] == "status"]
        assert states == ["busy", "idle"], "status sequence %r" % states
    return msgs


def send(kc, msg_type, content=None, channel="shell", metadata=None):
    """Send a request on shell or control; returns its msg_id."""
    msg = kc.session.msg(msg_type, content or {}, metadata=metadata or {})
    chan = kc.shell_channel if channel == "shell" else kc.control_channel
    chan.send(msg)
    return msg["header"]["msg_id"]


def request(kc, msg_type, content=None, channel="shell", timeout=TIMEOUT, check=True):
    """Send a request and return (reply, iopub messages from busy to idle)."""
    msg_id = send(kc, msg_type, content, channel=channel)
    reply = get_reply(kc, msg_id, channel=channel, timeout=timeout)
    msgs = iopub_for(kc, msg_id, timeout=timeout, check=check)
    return reply, msgs


def execute(kc, code, timeout=TIMEOUT, check=True, retry_aborted=None, **kw):
    """Run code; returns (execute_reply, iopub messages for it from busy to idle).

    pyc aborts only the requests that were already queued when a cell failed, so a request sent after the
    error reply runs.  ipykernel aborts whatever arrives until it has drained its queue, so a request sent
    just after an error reply can race with that; against kernels other than pyc an aborted reply is
    retried (a few times); retry_aborted says whether to, when kc is not the kernel under test (the reference
    ipykernel beside pyc).  Tests of aborting use kc.execute/get_reply directly."""
    if retry_aborted is None:
        retry_aborted = not IS_PYC
    for _ in range(5):
        msg_id = kc.execute(code, **kw)
        reply = get_reply(kc, msg_id, timeout=timeout)
        msgs = iopub_for(kc, msg_id, timeout=timeout, check=check)
        if not retry_aborted or reply["content"]["status"] != "aborted":
            break
        time.sleep(0.2)
    return reply, msgs


def wait_ready(kc, timeout=30, alive=None):
    """Returns once the kernel has answered a kernel_info_request on shell and its iopub has delivered that
    request's idle: every message the kernel publishes from then on reaches this client.  It is what
    jupyter_client's wait_for_ready establishes, without its last step (which waits for 0.2 s of silence on
    iopub, 0.2 s for every kernel a test starts).  The iopub messages before that idle (status starting,
    iopub_welcome, the busy) are consumed; replies to earlier rounds' requests are dropped."""
    deadline = time.monotonic() + timeout
    sent = []
    while True:
        if time.monotonic() > deadline:
            raise RuntimeError("Kernel didn't respond in %d seconds" % timeout)
        if alive is not None and not alive():
            raise RuntimeError("Kernel died before replying to kernel_info")
        sent.append(kc.kernel_info())
        try:
            reply = kc.get_shell_msg(timeout=1)
        except Empty:
            continue
        if reply["parent_header"].get("msg_id") not in sent or reply["msg_type"] != "kernel_info_reply":
            continue
        # The idle of the last request sent: iopub keeps the order, so everything before it is consumed too.  A
        # kernel slower to bind than the client to connect may have published it before iopub's subscription
        # reached it: then it never comes, and the next round's will.
        round_end = time.monotonic() + 1.0
        while time.monotonic() < round_end:
            try:
                msg = kc.get_iopub_msg(timeout=max(0.0, round_end - time.monotonic()))
            except Empty:
                break
            if (msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle"
                    and msg["parent_header"].get("msg_id") == sent[-1]):
                if len(sent) > 1:
                    drain(kc, "shell", quiet=0.05)
                kc._handle_kernel_info_reply(reply)
                return


def connect_client(connection_file, proc=None, timeout=30):
    """A BlockingKernelClient for a kernel we launched ourselves, once it answers kernel_info on shell and
    its iopub is connected.  (jupyter_client's wait_for_ready judges such a kernel by its heartbeat, which
    a loaded machine can miss; here only the process's exit counts as death.)"""
    from jupyter_client import BlockingKernelClient

    kc = BlockingKernelClient()
    kc.load_connection_file(connection_file)
    kc.start_channels(hb=False)
    deadline = time.monotonic() + timeout
    # A kernel slower than a second to start (ipykernel always, pyc under load) answers a request of an
    # earlier round: every reply to one of ours counts, or the replies would stay one round behind for ever.
    sent = set()
    while True:
        if proc is not None and proc.poll() is not None:
            kc.stop_channels()
            raise RuntimeError("kernel exited with code %s before answering kernel_info" % proc.returncode)
        if time.monotonic() > deadline:
            kc.stop_channels()
            raise RuntimeError("kernel did not answer kernel_info within %ss" % timeout)
        sent.add(kc.kernel_info())
        try:
            reply = kc.get_shell_msg(timeout=1)
        except Empty:
            continue
        if reply["parent_header"].get("msg_id") not in sent:
            continue
        try:
            kc.get_iopub_msg(timeout=0.5)
        except Empty:
            continue  # iopub not subscribed yet: ask again
        drain(kc, "iopub", quiet=0.1)
        drain(kc, "shell", quiet=0.05)
        return kc


def outputs(msgs, types=None):
    """The iopub messages other than status and execute_input (or only those of the given types)."""
    if types is None:
        return [m for m in msgs if m["msg_type"] not in ("status", "execute_input")]
    if isinstance(types, str):
        types = (types,)
    return [m for m in msgs if m["msg_type"] in types]


def output_bytes(msgs):
    """The bytes the output cap counts in msgs: stream text, the compact JSON content of displays, results
    and errors (and their buffers)."""
    total = 0
    for m in msgs:
        if m["msg_type"] == "stream":
            total += len(m["content"]["text"].encode())
        elif m["msg_type"] in ("display_data", "update_display_data", "execute_result", "error", "clear_output"):
            total += len(json.dumps(m["content"], separators=(",", ":"), ensure_ascii=False).encode())
            total += sum(len(b) for b in m.get("buffers") or [])
    return total


def stream_text(msgs, name="stdout"):
    return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream" and m["content"]["name"] == name)


def result_text(msgs):
    """text/plain of the (single) execute_result, or None."""
    res = outputs(msgs, "execute_result")
    assert len(res) <= 1, "more than one execute_result: %r" % summarize(msgs)
    return res[0]["content"]["data"]["text/plain"] if res else None


def summarize(msgs):
    out = []
    for m in msgs:
        t = m["msg_type"]
        c = m["content"]
        if t == "status":
            out.append("status:" + c["execution_state"])
        elif t == "stream":
            text = c["text"]
            out.append("stream:%s:%r" % (c["name"], text if len(text) < 60 else text[:57] + "..."))
        elif t == "error":
            out.append("error:%s" % c.get("ename"))
        else:
            out.append(t)
    return out


def eval_value(kc, expr, timeout=TIMEOUT):
    """Evaluate expr as a user_expression; returns its text/plain (asserting status ok)."""
    reply, _ = execute(kc, "", user_expressions={"v": expr}, store_history=False, timeout=timeout)
    assert reply["content"]["status"] == "ok", reply["content"]
    v = reply["content"]["user_expressions"]["v"]
    assert v["status"] == "ok", v
    return v["data"]["text/plain"]


def drain(kc, channel="iopub", quiet=0.2):
    """Drop whatever is already queued on a channel."""
    get = {"iopub": kc.get_iopub_msg, "shell": kc.get_shell_msg, "control": kc.get_control_msg}[channel]
    while True:
        try:
            get(timeout=quiet)
        except Empty:
            return


def assert_alive(kc, timeout=TIMEOUT):
    """The kernel answers kernel_info and runs a cell."""
    reply, msgs = request(kc, "kernel_info_request", {}, timeout=timeout)
    assert reply["msg_type"] == "kernel_info_reply"
    reply, msgs = execute(kc, "print(6 * 7)", timeout=timeout)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stream_text(msgs) == "42\n"


def ipc_dir():
    """A fresh short directory for ipc sockets (unix socket paths are limited to about 107 bytes)."""
    return tempfile.mkdtemp(prefix="ipc-", dir=env_root())


def write_connection_file(transport="tcp", ip=None, key=None, signature_scheme="hmac-sha256"):
    """Write a fresh connection file in the isolated runtime dir; returns (path, info dict)."""
    from jupyter_client.connect import write_connection_file as wcf

    rt = os.environ.get("JUPYTER_RUNTIME_DIR") or tempfile.gettempdir()
    fd, path = tempfile.mkstemp(prefix="kernel-test-", suffix=".json", dir=rt)
    os.close(fd)
    os.unlink(path)
    if key is None:
        import uuid

        key = str(uuid.uuid4()).encode()
    if ip is None:
        ip = "127.0.0.1" if transport == "tcp" else os.path.join(ipc_dir(), "k")
    path, info = wcf(fname=path, transport=transport, ip=ip, key=key, signature_scheme=signature_scheme)
    return path, info
