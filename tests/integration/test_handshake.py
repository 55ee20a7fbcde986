"""The kernel startup handshake (messaging protocol 5.6, JEP 66), kernel side, against a registration service
written here (a ROUTER, as the spec describes it; not pyc's own launcher): given a registration file, the
kernel binds ports of its own, reports them in one signed single-frame content dict from a DEALER, and
starts serving once a signed ACK comes; it writes a connection file with those ports beside the
registration file; a bad ACK signature is refused; without an ACK it ends (exit 4) within the documented
time (PYC_REGISTRATION_TIMEOUT here); ports come from a range when one is given.

pyc only: ipykernel 6.17 knows no registration files.
"""

import hashlib
import hmac
import json
import os
import stat
import subprocess
import time
import uuid

import pytest
import zmq

import pyctest
from pyctest import TIMEOUT, connect_client, execute, pyc_only

pytestmark = pyc_only

PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


class Registrar:
    """A registration service: a ROUTER on a free loopback port, and the registration file that names it."""

    def __init__(self, tmp_path, port_as_string=False, extra=None):
        self.key = os.urandom(16).hex()
        self.kernel_id = str(uuid.uuid4())
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.linger = 0
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.dir = tmp_path
        self.path = str(tmp_path / "registration.json")
        reg = {"kernel_id": self.kernel_id, "transport": "tcp", "registration_ip": "127.0.0.1",
               "registration_port": str(self.port) if port_as_string else self.port,
               "signature_scheme": "hmac-sha256", "key": self.key}
        reg.update(extra or {})
        with open(self.path, "w") as f:
            json.dump(reg, f)

    def sign(self, data):
        return hmac.new(self.key.encode(), data, hashlib.sha256).hexdigest().encode()

    def receive(self, timeout=TIMEOUT):
        """(identity, content dict, signature ok) of the next report, or None."""
        if not self.sock.poll(int(timeout * 1000)):
            return None
        frames = self.sock.recv_multipart()
        ident, rest = frames[0], frames[1:]
        assert rest[0] == b"<IDS|MSG>" and len(rest) == 3, frames
        return ident, json.loads(rest[2]), hmac.compare_digest(rest[1], self.sign(rest[2]))

    def ack(self, ident, good=True):
        content = json.dumps({"status": "ok"}).encode()
        sig = self.sign(content) if good else b"0" * 64
        self.sock.send_multipart([ident, b"<IDS|MSG>", sig, content])

    def close(self):
        self.sock.close(0)
        self.ctx.term()


class Started:
    def __init__(self, path, env):
        self.stderr_path = pyctest.new_log_path("handshake-kernel")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(pyctest.kernel_argv(path), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err, env=pyctest.child_env(**env))
        pyctest.register_pid(self.proc.pid)

    def stderr(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None


@pytest.fixture
def handshake(tmp_path):
    made = []

    def start(port_as_string=False, extra=None, env=None):
        reg = Registrar(tmp_path, port_as_string, extra)
        k = Started(reg.path, dict({"PYC_REGISTRATION_TIMEOUT": "3"}, **(env or {})))
        made.append((reg, k))
        return reg, k

    yield start
    for reg, k in made:
        pyctest.kill_pid(k.proc.pid)
        k.proc.wait(timeout=10)
        reg.close()


@pytest.mark.parametrize("port_as_string", [False, True], ids=["numeric-port", "string-port"])
def test_report_ack_and_a_cell_on_the_reported_ports(handshake, port_as_string):
    reg, k = handshake(port_as_string)
    got = reg.receive()
    assert got is not None, "no report; kernel stderr:\n" + k.stderr()
    ident, content, signed = got
    assert signed, "the report's signature is not the key's HMAC of its content"
    assert content["kernel_id"] == reg.kernel_id
    ports = {name: content[name] for name in PORTS}
    assert all(isinstance(p, str) and 0 < int(p) < 65536 for p in ports.values()), content
    assert len(set(ports.values())) == 5
    reg.ack(ident)
    # the connection file beside the registration file, 0600, with the reported ports and the same key
    conn = reg.dir / ("kernel-%s.json" % reg.kernel_id)
    assert conn.exists(), list(reg.dir.iterdir())
    assert stat.S_IMODE(conn.stat().st_mode) == 0o600
    info = json.loads(conn.read_text())
    assert {name: str(info[name]) for name in PORTS} == ports
    assert info["key"] == reg.key and info["ip"] == "127.0.0.1"
    kc = connect_client(str(conn), k.proc)
    try:
        reply, msgs = execute(kc, "print('after the handshake'); 6 * 7")
        assert reply["content"]["status"] == "ok"
        assert pyctest.stream_text(msgs) == "after the handshake\n"
        kc.shutdown()
    finally:
        kc.stop_channels()
    assert k.wait_exit(TIMEOUT) == 0
    assert not conn.exists(), "the kernel's connection file outlived it"


def test_a_bad_ack_signature_is_refused(handshake):
    reg, k = handshake()
    ident, content, signed = reg.receive()
    reg.ack(ident, good=False)
    t0 = time.monotonic()
    rc = k.wait_exit(10)
    assert rc == 4, "exit %s; stderr:\n%s" % (rc, k.stderr())
    assert time.monotonic() - t0 < 5
    err = k.stderr()
    assert "refused an answer" in err and "1 answers refused" in err, err


def test_no_ack_ends_the_kernel(handshake):
    reg, k = handshake()
    assert reg.receive() is not None
    rc = k.wait_exit(10)                     # PYC_REGISTRATION_TIMEOUT=3
    assert rc == 4, "exit %s; stderr:\n%s" % (rc, k.stderr())
    assert "no signed answer" in k.stderr()
    assert not (reg.dir / ("kernel-%s.json" % reg.kernel_id)).exists()


def test_report_is_sent_again_until_answered(handshake):
    """A registration service that missed the first report (it was not reading yet) gets it again."""
    reg, k = handshake(env={"PYC_REGISTRATION_TIMEOUT": "10"})
    first = reg.receive()
    second = reg.receive(timeout=5)
    assert first is not None and second is not None
    assert first[1] == second[1]
    reg.ack(second[0])
    kc = connect_client(str(reg.dir / ("kernel-%s.json" % reg.kernel_id)), k.proc)
    kc.stop_channels()


@pytest.mark.parametrize("how", ["file", "env"])
def test_ports_come_from_a_range(handshake, how):
    import testports

    base = testports.free_run(31)       # this worker's ports: no other process of the run takes them meanwhile
    lo, hi = base, base + 30
    extra = {"port_range": [lo, hi]} if how == "file" else None
    env = {"PYC_PORT_RANGE": "%d-%d" % (lo, hi)} if how == "env" else None
    reg, k = handshake(extra=extra, env=env)
    got = reg.receive()
    assert got is not None, k.stderr()
    ident, content, _ = got
    assert all(lo <= int(content[name]) <= hi for name in PORTS), (lo, hi, content)
    reg.ack(ident)


def test_a_registration_file_that_cannot_work(tmp_path):
    path = tmp_path / "bad.json"
    for bad, word in (({"registration_port": 0}, "registration_port"),
                      ({"registration_port": "12x"}, "registration_port"),
                      ({"registration_port": 5555}, "kernel_id"),
                      ({"registration_port": 5555, "kernel_id": "k", "transport": "ipc"}, "tcp")):
        reg = {"transport": "tcp", "key": "k", "signature_scheme": "hmac-sha256"}
        reg.update(bad)
        path.write_text(json.dumps(reg))
        p = subprocess.run(pyctest.kernel_argv(str(path)), capture_output=True, text=True, timeout=TIMEOUT,
                           env=pyctest.child_env())
        assert p.returncode == 2 and word in p.stderr, (bad, p.returncode, p.stderr)
