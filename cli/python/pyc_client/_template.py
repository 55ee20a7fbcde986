"""A jupyter_client kernel provisioner that starts each kernel as a fork of a warm template: a pyc kernel that
has run its start-up code (say `import numpy, pandas`) once, and from then on only forks sessions (README,
"Kernels from a warm template").

Turn it on for a kernelspec with `pyc-kernel install --template NAME --preload "CODE"`, which writes

    "metadata": {"kernel_provisioner": {"provisioner_name": "pyc-template-provisioner",
                                        "config": {"template": "NAME", "preload": "CODE"}}}

The first start of such a kernelspec on a machine starts the template (its own process, in a session of its
own, so that it outlives the manager that started it), runs CODE in it, and records it in
JUPYTER_RUNTIME_DIR/pyctemplate-NAME-FINGERPRINT.json (not pyc-*: those are the `pyc` command's sessions);
every start after it, by this process or another, forks a
session from it (comm target pyc.fork) instead of starting Python.  Each session is a full kernel with its own
key, ports (bound by the session itself: no port race) and connection file, started in the manager's working
directory; it ends when its manager's process ends (the fork's "watch"), not when the template does.
restart_kernel() ends the session and forks a fresh one on the same address, key and ports, so that clients
go on without reconnecting.  A template that has died, or whose kernelspec (argv, environment, start-up code)
has changed, is started again on the next start; sessions forked from the old one go on serving.

jupyter_client finds the class through the entry point `pyc-template-provisioner` (group
jupyter_client.kernel_provisioners), written beside the pyc_client package like the handshake provisioner's.

Config (traitlets, e.g. in the kernelspec's provisioner "config"): template (the name; default the kernelspec's
name), preload (the start-up code), start_timeout (seconds for the template's start and start-up code, 300),
fork_timeout (seconds for a fork's answer, 30), spares (sessions the template keeps forked ahead of the starts,
2: a start then takes one over instead of waiting for fork(2), CPython's after-fork handlers and five binds).
"""

import asyncio
import fcntl
import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import threading
import time
import uuid

import zmq
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase
from jupyter_client.session import Session
from traitlets import Float, Int, Unicode

from ._provisioner import PORTS, HandshakeError, registration

#: Environment variables that belong to one session, not to the template every session is forked from.
SESSION_ONLY_ENV = ("JPY_PARENT_PID", "JPY_SESSION_NAME")

#: What {connection_file} of the kernelspec's argv stands for until the template's file is known (an absolute
#: path, which jupyter_client leaves as it is).
PLACEHOLDER = "/{pyc-template-connection-file}"

#: Environment variables left out of a template's fingerprint: they differ from one shell to the next without
#: changing what a kernel does.
VOLATILE_ENV = ("PWD", "OLDPWD", "SHLVL", "_")

#: A template of a kernelspec that no manager has forked from for this long is ended when another template of
#: the same kernelspec (another argv, environment or start-up code) starts.
UNUSED_TEMPLATE_S = 3600

#: How long the provisioner waits for a session to end after a shutdown_request or a SIGKILL before it hands
#: the wait back to jupyter_client (which then looks every 0.1 s).
SHUTDOWN_WAIT_S = 1.0

#: Live sessions a template may have at once (its PYC_MAX_CHILDREN unless the kernelspec sets one).
TEMPLATE_MAX_CHILDREN = 4096


class TemplateError(RuntimeError):
    """The template could not be started, its start-up code failed, or it could not fork a session."""


def _runtime_dir():
    from jupyter_core.paths import jupyter_runtime_dir

    path = jupyter_runtime_dir()
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def _touch(path):
    """Marks a template as used now (its record's time), so that it is not taken for an unused one."""
    try:
        os.utime(path)
    except OSError:
        pass


def _proc_stat(pid):
    """(state, start time) of process pid from /proc/PID/stat (its 3rd field, and its 22nd: clock ticks after
    boot), or None when there is no such process."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _pid_alive(pid, start=None):
    """True when process pid exists, has not ended (a zombie has ended) and, when start is given, is the
    process that started then (a pid recorded before a reboot, or long ago, may name another process now)."""
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X") and (start is None or stat[1] == start)


def _pid_start(pid):
    """The start time of process pid (clock ticks after boot), or None."""
    stat = _proc_stat(pid)
    return stat[1] if stat is not None else None


def _record_alive(record):
    """True when the template a record names is alive (the same process: its start time is recorded)."""
    return isinstance(record, dict) and _pid_alive(record.get("pid", 0), record.get("pid_start"))


class Template:
    """A live template as this process knows it: its record, and a shell and iopub connection to it, made
    once and kept (a fork is then one message out and one in)."""

    def __init__(self, record):
        self.record = record
        self.pid = record["pid"]
        info = record["connection"]
        self.session = Session(key=info["key"].encode(), signature_scheme=info["signature_scheme"])
        ctx = zmq.Context.instance()
        url = "tcp://%s:%%d" % info["ip"]
        self.shell = ctx.socket(zmq.DEALER)
        self.shell.linger = 0
        self.shell.connect(url % info["shell_port"])
        self.iopub = ctx.socket(zmq.SUB)
        self.iopub.linger = 0
        self.iopub.setsockopt(zmq.SUBSCRIBE, b"")
        self.iopub.connect(url % info["iopub_port"])
        self.subscribed = False
        self._lock = None            # (event loop, asyncio.Lock): a thread may run a new loop for each call

    def close(self):
        self.shell.close(0)
        self.iopub.close(0)

    async def _recv(self, sock, deadline):
        looked = time.monotonic()
        while True:
            if sock.poll(0):
                return self.session.recv(sock, copy=True)[1]
            now = time.monotonic()
            if now > deadline:
                return None
            # Whether the template still lives: every 50 ms of waiting, not at each 0.5 ms turn of the wait.
            if now - looked > 0.05:
                looked = now
                if not _record_alive(self.record):
                    raise TemplateError("the template (pid %d) ended" % self.pid)
            await asyncio.sleep(0.0005)

    async def _subscribe(self, deadline):
        """Waits until the template's iopub has our subscription (its iopub_welcome, JEP 65), so that the
        answer to the first fork is not published before we listen."""
        while not self.subscribed:
            msg = await self._recv(self.iopub, deadline)
            if msg is None:
                raise TemplateError("the template's iopub did not welcome us within the timeout")
            self.subscribed = msg["header"]["msg_type"] == "iopub_welcome"

    async def request(self, msg_type, content, timeout, answer):
        """Sends one shell request and returns the first iopub message answer(msg) accepts among those whose
        parent is that request; None when timeout s pass first."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        async with self._lock[1]:
            deadline = time.monotonic() + timeout
            await self._subscribe(deadline)
            sent = self.session.send(self.shell, msg_type, content)
            while True:
                msg = await self._recv(self.iopub, deadline)
                if msg is None:
                    return None
                while self.shell.poll(0):
                    self.shell.recv_multipart()          # replies (execute_reply) are read off and dropped
                if msg["parent_header"].get("msg_id") == sent["header"]["msg_id"] and answer(msg):
                    return msg

    async def run(self, code, timeout):
        """Runs code in the template; raises TemplateError with its traceback when it fails."""
        failed = []

        def done(msg):
            if msg["header"]["msg_type"] == "error":
                failed.append("\n".join(msg["content"].get("traceback") or [msg["content"].get("evalue", "")]))
            return msg["header"]["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"

        if await self.request("execute_request", {"code": code, "silent": False, "store_history": False,
                                                  "user_expressions": {}, "allow_stdin": False,
                                                  "stop_on_error": True}, timeout, done) is None:
            raise TemplateError("the template's start-up code did not finish within %g s" % timeout)
        if failed:
            raise TemplateError("the template's start-up code failed:\n" + re.sub(r"\x1b\[[0-9;]*m", "", failed[0]))

    async def fork(self, data, timeout):
        """One pyc.fork of the template: its answer's data ({"status": "ok", "children": [...]} or an error)."""
        comm_id = uuid.uuid4().hex
        msg = await self.request("comm_open", {"comm_id": comm_id, "target_name": "pyc.fork", "data": data},
                                 timeout, lambda m: m["header"]["msg_type"] == "comm_msg")
        if msg is None:
            raise TemplateError("the template did not fork within %g s" % timeout)
        return msg["content"]["data"]


#: The templates this process is connected to, by (record path, thread): ZeroMQ sockets belong to one thread,
#: and a blocking KernelManager runs its coroutines in the thread that calls it (a start storm in threads).
_templates = {}


class TemplateProvisioner(KernelProvisionerBase):
    """Each kernel a fork of the template named by the kernelspec (see the module's text)."""

    template = Unicode("", config=True, help="The template's name (default: the kernelspec's name).")
    preload = Unicode("", config=True, help="Code the template runs once, before it forks any session.")
    start_timeout = Float(300.0, config=True, help="Seconds for the template to start and run its preload.")
    fork_timeout = Float(30.0, config=True, help="Seconds for the template to answer a fork.")
    spares = Int(2, config=True, help="Sessions the template keeps forked ahead of the starts (0 to 8): a start "
                                      "that finds one ready takes it over instead of waiting for a fork.")

    pid = None
    _pidfd = None
    _connection = None      # the session's connection, kept for a restart in place
    _template_argv = None
    _template_env = None

    # -- the template --

    def _name(self):
        """The template's name: the config's, else the kernelspec's made a `pyc` session name (lowercase
        letters, digits, '_' and '-'), so that `pyc new NAME --from TEMPLATE` can name it."""
        if self.template:
            if not re.fullmatch(r"[a-z0-9_-]{1,80}", self.template):
                raise TemplateError("a template's name is 1 to 80 of a-z, 0-9, '_' and '-': %r" % self.template)
            return self.template
        return re.sub(r"[^a-z0-9_-]", "-", (self.parent.kernel_name or "pyc").lower())[:80]

    def _fingerprint(self, argv, env):
        """What makes two templates the same: the program (its path and the file it names: a pyc rebuilt or
        upgraded in place is another program, and a template of the old one must not serve new sessions)
        and its arguments, the environment and the code."""
        env = sorted((k, v) for k, v in env.items() if k not in VOLATILE_ENV)
        program = shutil.which(argv[0], path=dict(env).get("PATH")) if argv else None
        try:
            st = os.stat(program) if program else None
            binary = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns] if st else None
        except OSError:
            binary = None
        return hashlib.sha256(json.dumps([argv, env, self.preload, binary]).encode()).hexdigest()[:16]

    async def _template(self):
        """The live template for this kernelspec, started (under a lock shared by every process of this
        user) when there is none or it is not the one the kernelspec describes."""
        name = self._name()
        rdir = _runtime_dir()
        fingerprint = self._fingerprint(self._template_argv, self._template_env)
        kernel_id = "pyctemplate-%s-%s" % (name, fingerprint)
        record_path = os.path.join(rdir, kernel_id + ".json")
        here = (record_path, threading.get_ident())
        known = _templates.get(here)
        if known is not None and _record_alive(known.record):
            _touch(record_path)
            return known
        lock = os.open(os.path.join(rdir, "pyctemplate-%s.lock" % name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                       0o600)
        try:
            deadline = time.monotonic() + self.start_timeout
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TemplateError("another process kept template %s's lock for %g s"
                                            % (name, self.start_timeout))
                    await asyncio.sleep(0.01)
            record = None
            try:
                with open(record_path) as f:
                    record = json.load(f)
            except (OSError, ValueError):
                pass
            if known is not None:
                known.close()
                del _templates[here]
            if _record_alive(record):
                _templates[here] = Template(record)
                _touch(record_path)
                return _templates[here]
            self._end_unused(name, rdir, record_path)
            argv = [a.replace(PLACEHOLDER, os.path.join(rdir, kernel_id + "-registration.json"))
                    for a in self._template_argv]
            t = await self._start_template(name, kernel_id, rdir, argv, fingerprint)
            tmp = record_path + ".tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(t.record, f)
            os.replace(tmp, record_path)
            _templates[here] = t
            return t
        finally:
            os.close(lock)

    def _end_unused(self, name, rdir, keep):
        """Ends the other templates of this kernelspec that nobody forked from for UNUSED_TEMPLATE_S (their
        sessions go on), and forgets those that ended."""
        prefix = "pyctemplate-%s-" % name
        for entry in os.listdir(rdir):
            path = os.path.join(rdir, entry)
            if not (entry.startswith(prefix) and entry.endswith(".json")) or path == keep:
                continue
            fork = re.fullmatch(re.escape(prefix) + r"[0-9a-f]{16}-registration-fork-([0-9]+)\.json", entry)
            if fork is not None:
                # The connection file of a session or spare forked from a template of this kernelspec.  A
                # spare dies with its template (SIGKILL: a template killed leaves its spares no time to
                # remove their files), so the file of a process that has ended is removed here.
                if not _pid_alive(int(fork.group(1))):
                    try:
                        os.unlink(path)
                    except OSError:
                        pass
                continue
            if len(entry) != len(prefix) + 16 + len(".json"):
                continue                    # a connection file, a registration file, another name's template
            try:
                with open(path) as f:
                    record = json.load(f)
                unused = time.time() - os.stat(path).st_mtime
            except (OSError, ValueError):
                continue
            alive = _record_alive(record)
            if alive and unused < UNUSED_TEMPLATE_S:
                continue
            if alive:
                self.log.info("template %s: ending the template pid %d, unused for %d s", name, record["pid"], unused)
                try:
                    os.kill(record["pid"], signal.SIGTERM)
                except OSError:
                    pass
                for key, t in list(_templates.items()):
                    if t.pid == record["pid"]:
                        t.close()
                        del _templates[key]
                        process = getattr(t, "process", None)
                        if process is not None:      # ours: reaped when it has ended, not left a zombie
                            threading.Thread(target=process.wait, daemon=True).start()
            try:
                os.unlink(path)
            except OSError:
                pass

    async def _start_template(self, name, kernel_id, rdir, argv, fingerprint):
        """Starts the template with the protocol 5.6 handshake (its ports are its own), in a process session
        of its own with its output in KERNEL_ID.log, and runs the start-up code in it."""
        reg_path = os.path.join(rdir, "%s-registration.json" % kernel_id)
        key = uuid.uuid4().hex.encode()
        scheme = "hmac-sha256"
        sock = zmq.Context.instance().socket(zmq.ROUTER)
        sock.linger = 0
        try:
            port = sock.bind_to_random_port("tcp://127.0.0.1")
            fd = os.open(reg_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({"kernel_id": kernel_id, "transport": "tcp", "registration_ip": "127.0.0.1", "ip":
                           "127.0.0.1", "registration_port": port, "signature_scheme": scheme,
                           "key": key.decode()}, f)
            env = dict(self._template_env)
            env.setdefault("PYC_MAX_CHILDREN", str(TEMPLATE_MAX_CHILDREN))
            with open(os.path.join(rdir, "%s.log" % kernel_id), "ab") as log:
                process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                           start_new_session=True, close_fds=True, cwd=rdir)
            try:
                info = await registration(sock, key, scheme, kernel_id, process, self.start_timeout, self.log)
            except HandshakeError as e:
                process.kill()
                raise TemplateError("template %s did not start: %s (its log: %s.log in %s)" % (name, e, kernel_id,
                                                                                             rdir)) from e
        finally:
            sock.close(0)
            try:
                os.unlink(reg_path)
            except FileNotFoundError:
                pass
        info["ip"] = "127.0.0.1"
        info["key"] = key.decode()
        record = {"name": name, "pid": process.pid, "pid_start": _pid_start(process.pid),
                  "fingerprint": fingerprint, "connection": info, "started": time.time()}
        t = Template(record)
        t.process = process                          # ours to reap (a zombie otherwise, were it to end)
        try:
            if self.preload:
                await t.run(self.preload, self.start_timeout)
            # What the template holds now is every session's, for good: one collection, then the garbage
            # collector's permanent generation (gc.freeze).  A session's collections then never walk the
            # objects it inherited, which would write to every page holding one (the session's private
            # memory), and its end (one collection: pyc_py_finish) stays a few milliseconds.
            await t.run("import gc as _pyc_gc\n_pyc_gc.collect()\n_pyc_gc.freeze()\ndel _pyc_gc", self.start_timeout)
        except BaseException:
            t.close()
            process.kill()
            process.wait()
            raise
        self.log.info("template %s started (pid %d)", name, process.pid)
        return t

    # -- the provisioner's interface --

    @property
    def has_process(self):
        return self.pid is not None

    async def pre_launch(self, **kwargs):
        km = self.parent
        if km.transport != "tcp":
            raise TemplateError("template sessions are tcp kernels; this kernel manager uses %s" % km.transport)
        kwargs = await super().pre_launch(**kwargs)
        extra = kwargs.pop("extra_arguments", [])
        if not km.connection_file:
            km.connection_file = os.path.join(_runtime_dir(), "kernel-%s.json" % self.kernel_id)
        saved = km.connection_file
        km.connection_file = PLACEHOLDER                 # the template's, put in by _template
        try:
            self._template_argv = km.format_kernel_cmd(extra_arguments=extra)
        finally:
            km.connection_file = saved
        env = dict(kwargs.get("env") or os.environ)
        for name in SESSION_ONLY_ENV:
            env.pop(name, None)
        self._template_env = env
        self._cwd = kwargs.get("cwd") or os.getcwd()
        kwargs["cmd"] = self._template_argv
        return kwargs

    async def launch_kernel(self, cmd, **kwargs):
        km = self.parent
        t = await self._template()
        data = {"n": 1, "watch": os.getpid(), "cwd": os.path.abspath(self._cwd), "not_carried": False,
                "spares": self.spares}
        if self._connection is not None:
            data["connection"] = {name: self._connection[name] for name in PORTS + ("ip", "key")}
        else:
            # The session's own key (a spare has one already): jupyter_client takes it from the answer.
            data["connection"] = {"ip": km.ip}
        answer = await t.fork(data, self.fork_timeout)
        if answer.get("status") != "ok" and self._connection is not None:
            # The restarted session could not have its old ports back (another process took one in between):
            # a new set, which jupyter_client takes up (its clients then connect anew).
            self.log.warning("template session: no fork on the old ports (%s); trying new ones",
                             answer.get("evalue"))
            data["connection"] = {"ip": km.ip}
            answer = await t.fork(data, self.fork_timeout)
        if answer.get("status") != "ok":
            raise TemplateError("template %s could not fork a session: %s" % (t.record["name"],
                                                                              answer.get("evalue")))
        child = answer["children"][0]
        self.pid = child["pid"]
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._pidfd = None
        info = dict(child["connection"])
        info["key"] = info["key"].encode()
        info["kernel_name"] = km.kernel_name
        self._connection = dict(child["connection"])
        self.connection_info = info
        return info

    # -- the session's process: not our child (the template's), so watched through its pidfd --

    def _ended(self):
        if self._pidfd is not None:
            p = select.poll()
            p.register(self._pidfd, select.POLLIN)
            return bool(p.poll(0))
        return not _pid_alive(self.pid)

    async def _await_end(self, timeout):
        """Returns once the session's process has ended (its pidfd is readable), or after timeout s (None: no
        bound).  jupyter_client looks whether a kernel it is ending has gone every 0.1 s, starting at once:
        waiting here for the end, which comes within milliseconds of a shutdown_request or a SIGKILL, spares a
        restart that look's 100 ms."""
        if self.pid is None or self._ended():
            return
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        if self._pidfd is not None:
            loop.add_reader(self._pidfd, lambda: done.done() or done.set_result(None))
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self._ended():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return
                # With a pidfd the reader wakes the wait (looked at again every second at most); without
                # one, a look every 50 ms.
                step = 0.05 if self._pidfd is None else 1.0
                try:
                    await asyncio.wait_for(asyncio.shield(done), step if left is None else min(step, left))
                except asyncio.TimeoutError:
                    pass
        finally:
            if self._pidfd is not None:
                loop.remove_reader(self._pidfd)

    async def poll(self):
        if self.pid is None or self._ended():
            return 0
        return None

    async def wait(self):
        await self._await_end(None)
        return 0

    async def shutdown_requested(self, restart=False):
        await self._await_end(SHUTDOWN_WAIT_S)

    async def send_signal(self, signum):
        if self.pid is None:
            return
        try:
            if self._pidfd is not None and hasattr(signal, "pidfd_send_signal"):
                signal.pidfd_send_signal(self._pidfd, signum)
            else:
                os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    async def kill(self, restart=False):
        await self.send_signal(signal.SIGKILL)
        await self._await_end(SHUTDOWN_WAIT_S)

    async def terminate(self, restart=False):
        await self.send_signal(signal.SIGTERM)

    async def cleanup(self, restart=False):
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        self.pid = None
        if not restart:
            self._connection = None

    async def get_provisioner_info(self):
        info = await super().get_provisioner_info()
        info.update({"pid": self.pid, "connection": self._connection})
        return info

    async def load_provisioner_info(self, provisioner_info):
        await super().load_provisioner_info(provisioner_info)
        self.pid = provisioner_info.get("pid")
        self._connection = provisioner_info.get("connection")
