"""A real `jupyter server` for the tests that drive kernels the way agent frameworks do (E2B, OpenHands,
smolagents, AutoGen's Docker executor): REST calls to /api/kernels and the kernel's messages over the
server's WebSocket (/api/kernels/ID/channels, JSON messages with a "channel" field).

    srv = JupyterServer(tmp_path, default_kernel_name="pyc")   # or extra_args, env=...
    base_url, token, proc = srv.start()
    model = srv.start_kernel("python3")                        # POST /api/kernels; None: the server's default
    with srv.websocket(model["id"]) as ws:                     # a blocking client over tornado
        reply, iopub = ws.request("execute_request", {"code": "print(6*7)"})
    srv.stop()                                                 # SIGTERM, then every pid it had is killed

The server listens on 127.0.0.1 with a random token, serves an empty root dir, and runs with the session's
isolated Jupyter dirs (pyctest.setup_environment) unless env= replaces some of them, e.g. a
JUPYTER_DATA_DIR holding `pyc-kernel install --user --name python3`.  Every process under it (its
kernels) is registered with pyctest while it runs and killed by pid at stop(), through webserver.Watched.
"""

import asyncio
import importlib.util
import json
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timezone

import pytest

from pyctest import PYC_PYTHON, TIMEOUT, child_env, env_root
from webserver import Watched, free_port, require


def _read_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


class JupyterServer:
    def __init__(self, tmp_path, default_kernel_name=None, extra_args=(), env=None):
        """tmp_path: a directory of the test's own (the root dir and the server's log go there).
        default_kernel_name: --MappingKernelManager.default_kernel_name, when given.  extra_args: more
        command-line options.  env: variables added to (or, with value None, removed from) the server's
        environment."""
        self.tmp_path = str(tmp_path)
        self.default_kernel_name = default_kernel_name
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.watched = Watched()
        self.proc = None
        self.base_url = None
        self.token = None
        self.log_path = None

    # ---- the process --------------------------------------------------------------------------------------

    def start(self, timeout=30.0):
        """Starts the server and waits until its REST API answers.  Returns (base_url, token, proc)."""
        require(
            importlib.util.find_spec("jupyter_server") is not None,
            "jupyter_server is not installed for %s (Debian package python3-jupyter-server)" % PYC_PYTHON,
        )
        require(importlib.util.find_spec("tornado") is not None, "tornado is not installed")
        port = free_port()
        self.token = secrets.token_hex(16)
        self.base_url = "http://127.0.0.1:%d" % port
        root = os.path.join(self.tmp_path, "server-root-%d" % port)
        os.makedirs(root, exist_ok=True)
        self.log_path = os.path.join(env_root(), "logs", "jupyter-server-%d.log" % port)
        argv = [
            PYC_PYTHON, "-m", "jupyter_server",
            "--no-browser", "--allow-root",
            "--ip=127.0.0.1", "--port=%d" % port, "--ServerApp.port_retries=0",
            "--ServerApp.token=%s" % self.token,
            "--ServerApp.password=",
            "--ServerApp.root_dir=%s" % root,
        ]  # fmt: skip
        if self.default_kernel_name is not None:
            argv.append("--MappingKernelManager.default_kernel_name=%s" % self.default_kernel_name)
        argv += self.extra_args
        env = child_env()
        for k, v in self.env.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        with open(self.log_path, "wb") as log:
            self.proc = self.watched.start(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                self.get("/api/kernelspecs")
                return self.base_url, self.token, self.proc
            except Exception as e:  # not listening yet
                last = e
                time.sleep(0.1)
        log = self.log()
        self.stop()
        pytest.fail("jupyter server did not answer at %s (%s; exit %s):\n%s" % (self.base_url, last, self.proc.poll(), log))

    def stop(self):
        """SIGTERM (the server shuts its kernels down), then every process it had is killed by pid."""
        self.watched.close()

    def log(self, tail=3000):
        if self.log_path is None:
            return ""
        with open(self.log_path, errors="replace") as f:
            return f.read()[-tail:]

    def kernel_processes(self):
        """{pid: argv} of the processes under the server (its kernels), each registered for the cleanup."""
        self.watched.scan()
        from pyctest import descendants_of

        return {pid: _read_cmdline(pid) for pid in descendants_of(self.proc.pid)}

    # ---- REST ---------------------------------------------------------------------------------------------

    def call(self, method, path, body=None, timeout=TIMEOUT):
        """One REST call; returns (status, decoded JSON or None)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={"Authorization": "token " + self.token, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                text = r.read().decode()
                return r.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, text

    def get(self, path):
        status, body = self.call("GET", path)
        assert status == 200, (path, status, body)
        return body

    def start_kernel(self, name=None, body=None):
        """POST /api/kernels with {"name": name}, or with no body at all when name and body are None (the
        server's default kernel).  Returns the kernel model; the kernel's process is registered."""
        if body is None and name is not None:
            body = {"name": name}
        status, model = self.call("POST", "/api/kernels", body)
        assert status == 201, "POST /api/kernels %s: %s %s\n%s" % (body, status, model, self.log())
        self.watched.scan()
        return model

    def shutdown_kernel(self, kernel_id):
        status, body = self.call("DELETE", "/api/kernels/" + kernel_id)
        assert status == 204, (status, body)

    # ---- WebSocket ----------------------------------------------------------------------------------------

    def websocket(self, kernel_id, timeout=TIMEOUT):
        """A blocking WebSocket client of kernel_id's channels (use it as a context manager)."""
        return KernelWebSocket(self, kernel_id, timeout)


class KernelWebSocket:
    """The kernel's channels over the server's WebSocket, as a framework's executor uses them: each request is
    a JSON text message whose "channel" says where it goes; the messages that come back carry their channel
    too.  Runs its own asyncio loop, so tests stay synchronous."""

    def __init__(self, server, kernel_id, timeout=TIMEOUT):
        self.server = server
        self.kernel_id = kernel_id
        self.timeout = timeout
        self.session = uuid.uuid4().hex
        self.loop = asyncio.new_event_loop()
        self.conn = None
        #: every message received, in order (those of other requests included)
        self.received = []

    def __enter__(self):
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        url = "ws://%s/api/kernels/%s/channels?session_id=%s" % (
            self.server.base_url.split("://", 1)[1],
            self.kernel_id,
            self.session,
        )
        req = HTTPRequest(url, headers={"Authorization": "token " + self.server.token})
        self.conn = self._run(lambda: websocket_connect(req))
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.conn is not None:
            conn, self.conn = self.conn, None

            async def close():
                conn.close()

            self._run(close)
        if not self.loop.is_closed():
            self.loop.run_until_complete(asyncio.sleep(0))
            self.loop.close()

    def _run(self, start, timeout=None):
        """Runs start() (which returns an awaitable) on this client's loop, within timeout seconds.  Every call
        into tornado goes through here: tornado's streams find their loop as the running one, and outside a
        running loop Python 3.14 has no current one to give them (RuntimeError)."""

        async def run():
            return await asyncio.wait_for(start(), timeout or self.timeout)

        return self.loop.run_until_complete(run())

    def write(self, msg):
        """Sends msg (a dict) as one JSON text message, and waits until it is written."""
        self._run(lambda: self.conn.write_message(json.dumps(msg)))

    def message(self, msg_type, content, channel="shell"):
        return {
            "header": {
                "msg_id": uuid.uuid4().hex,
                "msg_type": msg_type,
                "session": self.session,
                "username": "agent",
                "date": datetime.now(timezone.utc).isoformat(),
                "version": "5.3",
            },
            "parent_header": {},
            "metadata": {},
            "content": content,
            "channel": channel,
            "buffers": [],
        }

    def send(self, msg_type, content, channel="shell"):
        msg = self.message(msg_type, content, channel)
        self.write(msg)
        return msg["header"]["msg_id"]

    def recv(self, timeout=None):
        """The next message (a dict); fails when the server closes the socket."""
        text = self._run(self.conn.read_message, timeout)
        assert text is not None, "the server closed the WebSocket\n" + self.server.log()
        assert isinstance(text, str), "a binary WebSocket message (buffers) was not expected"
        msg = json.loads(text)
        self.received.append(msg)
        return msg

    def request(self, msg_type, content, channel="shell", timeout=None):
        """Sends a request and reads until both its reply and its iopub status idle came.  Returns (the
        reply, the iopub messages of the request in order, from busy to idle)."""
        msg_id = self.send(msg_type, content, channel)
        deadline = time.monotonic() + (timeout or self.timeout)
        reply, iopub, idle = None, [], False
        while reply is None or not idle:
            left = deadline - time.monotonic()
            assert left > 0, "no %s for %s within %ss: got %s" % (
                "reply" if reply is None else "idle",
                msg_type,
                timeout or self.timeout,
                [(m["channel"], m["msg_type"]) for m in iopub],
            )
            msg = self.recv(timeout=left)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["channel"] == "iopub":
                iopub.append(msg)
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    idle = True
            elif msg["channel"] == channel:
                reply = msg
        return reply, iopub

    def execute(self, code, timeout=None, **content):
        content = dict({"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}, **content)  # fmt: skip
        return self.request("execute_request", content, timeout=timeout)
