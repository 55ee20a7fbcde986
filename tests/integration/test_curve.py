"""CURVE transport encryption (README, "Encryption"): a connection file with curve_publickey and
curve_secretkey makes the kernel's five sockets CURVE servers.

The kernels here are started by hand (pyc-kernel -f FILE, the connection file written by the test) and
driven with raw pyzmq sockets, since jupyter_client 7.4 cannot make CURVE sockets itself; pyc_client's
use_curve/start_kernel are tested last.  "Refused" means no answer within a short bound, after which the same
kernel still answers an encrypted client: a CURVE server never lets a plaintext peer (or, with an allow-list,
an unlisted key) past the handshake, so nothing it sends reaches the kernel.
"""

import json
import os
import subprocess
import sys
import time

import pytest
import zmq
from jupyter_client.connect import write_connection_file
from jupyter_client.session import Session

import pyctest
from pyctest import UNDER_ASAN, pyc_only

sys.path.insert(0, os.path.join(pyctest.PYC_SRCDIR, "cli", "python"))
import pyc_client  # noqa: E402

pytestmark = [pyc_only, pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq has no CURVE")]

#: How long a refused client waits for the answer that must not come.
REFUSED_WAIT = 1.5


def new_connection(tmp_path, name="kernel.json", keypair=None, allowed=None, curve=True):
    """A connection file on free loopback ports, with a new CURVE key pair (or the one given)."""
    path = str(tmp_path / name)
    write_connection_file(path, ip="127.0.0.1", key=os.urandom(16).hex().encode(), kernel_name="pyc")
    if curve:
        pyc_client.write_curve_keys(path, keypair, allowed)
    with open(path) as f:
        return path, json.load(f)


class KernelProcess:
    """pyc-kernel started on a connection file, its stderr in a file; killed by pid at the end."""

    def __init__(self, path, env=None):
        self.path = path
        self.stderr_path = pyctest.new_log_path("curve-kernel")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(pyctest.kernel_argv(path), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err,
                                         env=pyctest.child_env(**(env or {})))
        pyctest.register_pid(self.proc.pid)

    def stderr(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        pyctest.kill_pid(self.proc.pid)
        self.proc.wait(timeout=10)


@pytest.fixture
def kernels():
    started = []
    yield lambda path, env=None: started.append(KernelProcess(path, env)) or started[-1]
    for k in started:
        k.stop()


class Client:
    """Raw sockets to one kernel: CURVE with the given key pair (None: plaintext), HMAC-signed messages."""

    def __init__(self, info, keypair=None):
        self.info = info
        self.keypair = keypair
        self.ctx = zmq.Context()
        self.session = Session(key=info["key"].encode(), signature_scheme=info["signature_scheme"])
        self.socks = []

    def socket(self, kind, channel):
        s = self.ctx.socket(kind)
        s.linger = 0
        # A refused handshake leaves a DEALER without a peer at times, and a send would then block for ever.
        s.sndtimeo = 5000
        if self.keypair is not None:
            s.curve_serverkey = self.info["curve_publickey"].encode()
            s.curve_publickey, s.curve_secretkey = (k if isinstance(k, bytes) else k.encode() for k in self.keypair)
        if kind == zmq.SUB:
            s.setsockopt(zmq.SUBSCRIBE, b"")
        s.connect("tcp://127.0.0.1:%d" % self.info["%s_port" % channel])
        self.socks.append(s)
        return s

    def request(self, sock, msg_type, content=None, wait=pyctest.TIMEOUT):
        """Sends a request; returns the reply (deserialized) or None when nothing came within wait seconds.
        Until the handshake is done, ZeroMQ keeps the request queued and sends it then."""
        msg = self.session.msg(msg_type, content or {})
        try:
            self.session.send(sock, msg)
        except zmq.Again:
            return None              # no peer took it: refused
        if not sock.poll(int(wait * 1000)):
            return None
        _, parts = self.session.feed_identities(sock.recv_multipart())
        reply = self.session.deserialize(parts)
        assert reply["parent_header"]["msg_id"] == msg["header"]["msg_id"]
        return reply

    def iopub_until_idle(self, sub, parent_id, wait=pyctest.TIMEOUT):
        """The iopub messages of one request, up to its idle status."""
        out, deadline = [], time.monotonic() + wait
        while time.monotonic() < deadline:
            if not sub.poll(100):
                continue
            _, parts = self.session.feed_identities(sub.recv_multipart())
            m = self.session.deserialize(parts)
            if m["parent_header"].get("msg_id") != parent_id:
                continue
            out.append(m)
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                return out
        raise AssertionError("no idle for %s on iopub in %s s" % (parent_id, wait))

    def ping(self, wait):
        hb = self.socket(zmq.REQ, "hb")
        hb.send(b"ping")
        return hb.recv() if hb.poll(int(wait * 1000)) else None

    def close(self):
        for s in self.socks:
            s.close(0)
        self.ctx.term()


def own_keypair(info):
    return info["curve_publickey"], info["curve_secretkey"]


def served(info, keypair, wait=pyctest.TIMEOUT):
    """True when a client with keypair gets a kernel_info_reply on shell within wait seconds."""
    c = Client(info, keypair)
    try:
        reply = c.request(c.socket(zmq.DEALER, "shell"), "kernel_info_request", wait=wait)
        return reply is not None and reply["msg_type"] == "kernel_info_reply"
    finally:
        c.close()


def test_encrypted_client_is_served_on_every_channel(tmp_path, kernels):
    """kernel_info on shell and control, a cell whose output comes on iopub, the heartbeat's echo."""
    path, info = new_connection(tmp_path)
    k = kernels(path)
    c = Client(info, own_keypair(info))
    try:
        sub = c.socket(zmq.SUB, "iopub")
        shell = c.socket(zmq.DEALER, "shell")
        # The kernel welcomes each subscription (JEP 65), encrypted like the rest: after it, nothing is missed.
        # (What the kernel published between the subscription and the welcome, its "starting" say, may come
        # first.)
        deadline = time.monotonic() + pyctest.TIMEOUT
        while True:
            assert sub.poll(int(max(0.1, deadline - time.monotonic()) * 1000)), "no iopub_welcome"
            _, parts = c.session.feed_identities(sub.recv_multipart())
            if c.session.deserialize(parts)["msg_type"] == "iopub_welcome":
                break
        reply = c.request(shell, "kernel_info_request")
        assert reply is not None and reply["content"]["implementation"] == "pyc"
        c.iopub_until_idle(sub, reply["parent_header"]["msg_id"])
        msg = c.session.msg("execute_request", {"code": "print('over curve'); 6 * 7", "silent": False})
        c.session.send(shell, msg)
        outputs = c.iopub_until_idle(sub, msg["header"]["msg_id"])
        assert shell.poll(int(pyctest.TIMEOUT * 1000))
        _, parts = c.session.feed_identities(shell.recv_multipart())
        assert c.session.deserialize(parts)["content"]["status"] == "ok"
        types = [m["msg_type"] for m in outputs]
        assert "stream" in types and "execute_result" in types
        stream = next(m for m in outputs if m["msg_type"] == "stream")
        assert stream["content"]["text"] == "over curve\n"
        result = next(m for m in outputs if m["msg_type"] == "execute_result")
        assert result["content"]["data"]["text/plain"] == "42"
        control = c.request(c.socket(zmq.DEALER, "control"), "kernel_info_request")
        assert control is not None and control["msg_type"] == "kernel_info_reply"
        assert c.ping(pyctest.TIMEOUT) == b"ping"
    finally:
        c.close()
    assert k.alive()


def test_plaintext_client_is_refused_and_the_kernel_goes_on(tmp_path, kernels):
    """A client that does not speak CURVE gets nothing on any channel (shell, control, iopub, heartbeat); the
    kernel then serves an encrypted client as before."""
    path, info = new_connection(tmp_path)
    k = kernels(path)
    assert served(info, own_keypair(info))
    plain = Client(info)
    try:
        sub = plain.socket(zmq.SUB, "iopub")
        assert plain.request(plain.socket(zmq.DEALER, "shell"), "kernel_info_request", wait=REFUSED_WAIT) is None
        assert plain.request(plain.socket(zmq.DEALER, "control"), "kernel_info_request", wait=0.5) is None
        assert plain.ping(0.5) is None
        assert not sub.poll(200)                 # the status messages of those requests never reached it
    finally:
        plain.close()
    assert k.alive()
    assert served(info, own_keypair(info))
    # A client with the wrong server key fails its handshake likewise.
    stranger = dict(info, curve_publickey=zmq.curve_keypair()[0].decode())
    assert not served(stranger, own_keypair(info), wait=REFUSED_WAIT)
    assert served(info, own_keypair(info))
    # And a plaintext kernel is unchanged: no CURVE unless the file asks for it.
    path2, info2 = new_connection(tmp_path, "plain.json", curve=False)
    kernels(path2)
    assert served(info2, None)


def test_any_keypair_connects_without_an_allow_list(tmp_path, kernels):
    """CURVE's default, as with ipykernel: a client that knows the kernel's public key connects with any key
    pair of its own."""
    path, info = new_connection(tmp_path)
    kernels(path)
    assert served(info, zmq.curve_keypair())


def test_allow_list_in_the_connection_file(tmp_path, kernels):
    """With curve_allowed_clients, a listed client and the file's own key pair are served; an unlisted client
    with a valid key pair is refused on shell and iopub (one log line says so), though the heartbeat echoes
    for it (jupyter_client's heartbeat uses a throwaway key pair)."""
    listed, unlisted = zmq.curve_keypair(), zmq.curve_keypair()
    path, info = new_connection(tmp_path, allowed=[listed[0].decode()])
    k = kernels(path)
    assert served(info, listed)
    assert served(info, own_keypair(info))
    c = Client(info, unlisted)
    try:
        sub = c.socket(zmq.SUB, "iopub")
        assert c.request(c.socket(zmq.DEALER, "shell"), "kernel_info_request", wait=REFUSED_WAIT) is None
        assert not sub.poll(200)
        assert c.ping(pyctest.TIMEOUT) == b"ping"
    finally:
        c.close()
    assert k.alive()
    assert served(info, listed)
    log = k.stderr()
    assert "shell: refused a CURVE client from 127.0.0.1" in log
    assert unlisted[0].decode() in log and "is not on the allow-list" in log


def test_allow_list_from_the_environment(tmp_path, kernels):
    """PYC_CURVE_ALLOWED_CLIENTS names a file of keys (one per line, then a note; # comments); its keys join
    the connection file's.  A list that others may write is refused."""
    a, b, stranger = zmq.curve_keypair(), zmq.curve_keypair(), zmq.curve_keypair()
    keys = tmp_path / "allowed"
    keys.write_text("# who may connect\n%s alice@laptop\n\n" % a[0].decode())
    keys.chmod(0o600)
    path, info = new_connection(tmp_path, allowed=[b[0].decode()])
    kernels(path, env={"PYC_CURVE_ALLOWED_CLIENTS": str(keys)})
    assert served(info, a)
    assert served(info, b)
    assert not served(info, stranger, wait=REFUSED_WAIT)

    keys.chmod(0o622)
    path2, _ = new_connection(tmp_path, "k2.json")
    k2 = kernels(path2, env={"PYC_CURVE_ALLOWED_CLIENTS": str(keys)})
    assert pyctest.wait_exit(k2.proc, 30) == 2
    assert "may be written by group or others" in k2.stderr()


def bad_file(tmp_path, name, **members):
    path, info = new_connection(tmp_path, name)
    info.update(members)
    for k, v in list(info.items()):
        if v is None:
            del info[k]
    with open(path, "w") as f:
        json.dump(info, f)
    return path


@pytest.mark.parametrize("members,message", [
    ({"curve_secretkey": "tooshort"}, "curve_secretkey is 8 characters long; a CURVE key is 40 characters of Z85"),
    ({"curve_publickey": "~" * 40}, "curve_publickey is not a CURVE key: character 1 is not a Z85 character"),
    ({"curve_secretkey": None}, '"curve_publickey" without "curve_secretkey" (CURVE needs both keys)'),
    ({"curve_publickey": zmq.curve_keypair()[0].decode()}, "curve_publickey is not the public key of curve_secretkey"),
    ({"curve_allowed_clients": ["x"]}, "curve_allowed_clients[0] is 1 characters long"),
])
def test_bad_keys_are_refused_at_start(tmp_path, kernels, members, message):
    """A connection file whose CURVE keys cannot work: the kernel does not start (exit 2) and says why."""
    k = kernels(bad_file(tmp_path, "bad.json", **members))
    assert pyctest.wait_exit(k.proc, 30) == 2
    assert message in k.stderr()


def test_allow_list_without_keys_is_refused(tmp_path, kernels):
    keys = tmp_path / "allowed"
    keys.write_text(zmq.curve_keypair()[0].decode() + "\n")
    keys.chmod(0o600)
    path, _ = new_connection(tmp_path, curve=False)
    k = kernels(path, env={"PYC_CURVE_ALLOWED_CLIENTS": str(keys)})
    assert pyctest.wait_exit(k.proc, 30) == 2
    assert "PYC_CURVE_ALLOWED_CLIENTS is set, but the connection file has no CURVE keys" in k.stderr()


SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
/* A libzmq without CURVE, as far as zmq_has tells. */
int zmq_has(const char *capability)
{
    int (*real)(const char *) = (int (*)(const char *))dlsym(RTLD_NEXT, "zmq_has");
    return strcmp(capability, "curve") == 0 ? 0 : real(capability);
}
"""


@pytest.mark.skipif(UNDER_ASAN, reason="LD_PRELOAD before the sanitizer runtime is refused")
def test_libzmq_without_curve_refuses_to_start(tmp_path, kernels):
    """zmq_has("curve") false (a shim in LD_PRELOAD says so): the kernel asked for CURVE does not start."""
    src, lib = tmp_path / "shim.c", tmp_path / "shim.so"
    src.write_text(SHIM)
    cc = subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl"], capture_output=True)
    if cc.returncode != 0:
        pytest.skip("no C compiler for the shim: %s" % cc.stderr.decode()[:200])
    path, _ = new_connection(tmp_path)
    k = kernels(path, env={"LD_PRELOAD": str(lib)})
    assert pyctest.wait_exit(k.proc, 30) == 2
    assert "asks for CURVE encryption" in k.stderr() and "was built without CURVE" in k.stderr()


def test_pyc_client_runs_a_cell_and_forks_over_curve(tmp_path):
    """pyc_client.start_kernel: a CURVE kernel through jupyter_client 7.4 (keys written into the connection
    file, every socket of the client and of the manager made a CURVE client); a cell runs, the kernel is
    shut down through the manager's own (encrypted) control socket, and a forked child has keys of its own."""
    km, kc = pyc_client.start_kernel("pyc", allowed_clients=[])
    pids = [km.provisioner.process.pid]
    pyctest.register_pid(pids[0])
    children = []
    try:
        assert pyc_client.curve_info(km.connection_file) is not None
        out = []
        reply = kc.execute_interactive("import os; print('pid', os.getpid())", timeout=pyctest.TIMEOUT,
                                       output_hook=out.append)
        assert reply["content"]["status"] == "ok"
        assert any(m["msg_type"] == "stream" and m["content"]["text"] == "pid %d\n" % pids[0] for m in out)
        assert kc.is_alive()
        children = pyc_client.fork(kc, 1)
        child = children[0]
        pyctest.register_pid(child.pyc_child["pid"])
        conn = child.pyc_child["connection"]
        assert conn["curve_publickey"] != pyc_client.curve_info(km.connection_file)["curve_publickey"]
        assert conn["curve_allowed_clients"] == []
        r = child.execute_interactive("x = 1", timeout=pyctest.TIMEOUT)
        assert r["content"]["status"] == "ok"
        # A plaintext client of the child gets nothing either.
        assert not served(conn, None, wait=REFUSED_WAIT)
    finally:
        for ch in children:
            ch.stop_channels()
            pyctest.kill_pid(ch.pyc_child["pid"])
        kc.stop_channels()
        km.shutdown_kernel(now=False)
    assert not pyctest.pid_alive(pids[0])


def test_kernelspecs_advertise_curve(tmp_path):
    """JEP 145: metadata.supported_encryption lists "curve", in the kernelspec `pyc-kernel install` writes and
    in the one `make install` puts in place."""
    prefix = tmp_path / "prefix"
    p = subprocess.run([pyctest.PYC_KERNEL, "install", "--prefix", str(prefix), "--name", "pyc-curve"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    spec = json.loads((prefix / "share" / "jupyter" / "kernels" / "pyc-curve" / "kernel.json").read_text())
    assert spec["metadata"]["supported_encryption"] == ["curve"]
    with open(os.path.join(pyctest.PYC_SRCDIR, "kernelspec", "pyc", "kernel.json.in")) as f:
        assert json.load(f)["metadata"]["supported_encryption"] == ["curve"]
