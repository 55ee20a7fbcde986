"""A fake Jupyter gateway for the tests of `pyc-kernel gateway-launch` (launcher protocol version 1).

It does what Enterprise Gateway (enterprise_gateway/services/processproxies/processproxy.py) and Gateway
Provisioners (gateway_provisioners/response_manager.py, remote_provisioner.py) do with a kernel launcher, on
Debian's python3-pycryptodome (namespace `Cryptodome`) and python3-jupyter-client:

  - an RSA-1024 key pair, whose public key goes to the launcher as the gateways give it: the PEM body without
    its header, footer and newlines;
  - a response socket on 127.0.0.1:0 (or another address): each connection is read in 1024-byte chunks to EOF
    and decoded like the upstream receivers: base64 -> JSON {"version", "key", "conn_info"} -> the AES key
    from PKCS1_v1_5.new(private_key).decrypt(b64decode(key), b"\\x42") -> AES-ECB decrypt of conn_info ->
    unpad(..., 16) -> JSON connection info;
  - the client of the launcher's communication port: a fresh connection per request with a 5 ms socket
    timeout (EG_SOCKET_TIMEOUT's default), json.dumps(request), shutdown(SHUT_WR) for a shutdown, close;
  - a launcher started as a subprocess with an isolated environment and a TMPDIR of its own, ended by pid
    (its own and its kernel's) whatever happened.

The code is written here from the upstream receivers' behaviour; no upstream code is copied.
"""

import base64
import errno
import json
import os
import queue
import signal
import socket
import subprocess
import threading
import time

from Cryptodome.Cipher import AES, PKCS1_v1_5
from Cryptodome.PublicKey import RSA
from Cryptodome.Util.Padding import unpad

import pyctest

#: The pyc-kernel under test ($PYC_KERNEL, else the build directory's).
PYC_KERNEL = pyctest.PYC_KERNEL or os.path.join(pyctest.PYC_SRCDIR, "build", "pyc-kernel")

#: The size of the gateways' RSA key (ResponseManager.KEY_SIZE).
KEY_SIZE = 1024

#: EG's default socket timeout for the communication port (EG_SOCKET_TIMEOUT, 5 ms).
SOCKET_TIMEOUT = 0.005

#: How long a payload may take to come: the launcher gives the kernel 25 s to report its ports, then delivers.
START_TIMEOUT = 30.0

#: TCP state LISTEN in /proc/PID/net/tcp.
TCP_LISTEN = "0A"

#: The five ZMQ ports of a connection file.
PORT_KEYS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")

#: The keys of the connection info an upstream launcher sends: the connection file plus pid, pgid, comm_port
#: and kernel_id.
CONN_KEYS = frozenset(PORT_KEYS + ("ip", "key", "transport", "signature_scheme", "kernel_name", "pid", "pgid",
                                   "comm_port", "kernel_id"))

#: The keys whose values are integers.
INT_KEYS = PORT_KEYS + ("comm_port", "pid", "pgid")

#: Variables of the test process that would change what a launcher does: the upstream names, pyc's own
#: PYC_GATEWAY_* settings, and the parent-pid watch of pyc-kernel.  They are removed from every launcher's
#: environment, so that a test sets exactly what it means to.
_LAUNCHER_VARS = ("KERNEL_ID", "RESPONSE_ADDRESS", "PUBLIC_KEY", "PORT_RANGE", "MIN_PORT_RANGE_SIZE",
                  "MAX_PORT_RANGE_RETRIES", "JPY_PARENT_PID")
_LAUNCHER_PREFIXES = ("EG_", "KERNEL_", "PYC_GATEWAY_")


# ---- keys and payloads ------------------------------------------------------------------------------------

_shared_key = []


def shared_private_key():
    """The key pair of this test process, made once, as a gateway makes one for its whole life."""
    if not _shared_key:
        _shared_key.append(RSA.generate(KEY_SIZE))
    return _shared_key[0]


def new_private_key():
    """A key pair of its own, for a second gateway that must not be able to read the first one's payloads."""
    return RSA.generate(KEY_SIZE)


def public_key_string(private_key):
    """The public key as the gateways pass it to a launcher: the PEM body without header, footer and
    newlines (a base64 DER SubjectPublicKeyInfo, 216 characters for RSA-1024)."""
    pem = private_key.publickey().export_key("PEM").decode()
    return pem.replace("-----BEGIN PUBLIC KEY-----", "").replace("-----END PUBLIC KEY-----", "").replace("\n", "")


class Delivery:
    """One connection to the response socket: what came (raw), and what it decoded to, or why it did not.

    Attributes: peer (address, port), raw (str), outer (the JSON wrapper), key_ct (bytes, the RSA-encrypted
    AES key), aes_key (bytes), info (the connection info dict), error (text, None when decoding worked)."""

    def __init__(self, peer, raw):
        self.peer = peer
        self.raw = raw
        self.outer = None
        self.key_ct = None
        self.aes_key = None
        self.info = None
        self.error = None

    def __repr__(self):
        return "<Delivery from %s: %d bytes, %s>" % (self.peer, len(self.raw), self.error or "decoded")


def decode_payload(raw, private_key):
    """Decodes a version-1 payload as the upstream receivers do; returns a Delivery whose error says what
    failed.  The steps and their failure modes are the receivers': the payload and its two fields go through
    base64.b64decode (not strict), a failed RSA decryption returns the sentinel b"\\x42" (which then fails as
    an AES key), the padding is PKCS#7 over 16 bytes."""
    d = Delivery(None, raw)
    try:
        outer = json.loads(base64.b64decode(raw))
        d.outer = outer
        version = outer.get("version")
        if version is None:
            raise ValueError("the payload has no version indicator")
        if version != 1:
            raise ValueError("unexpected version indicator %r" % (version,))
        d.key_ct = base64.b64decode(outer["key"].encode())
        d.aes_key = PKCS1_v1_5.new(private_key).decrypt(d.key_ct, b"\x42")
        cipher = AES.new(d.aes_key, AES.MODE_ECB)
        conn_ct = base64.b64decode(outer["conn_info"].encode())
        d.info = json.loads(unpad(cipher.decrypt(conn_ct), 16).decode())
    except Exception as e:
        d.error = "%s: %s" % (type(e).__name__, e)
    return d


def connection_info_problems(info, kernel_id, ip=None):
    """What is wrong with a decoded connection info (a list of sentences; empty when nothing is): the key set
    of an upstream launcher, integer ports/pid/pgid, distinct ports, the kernel id echoed, hmac-sha256, tcp,
    kernel_name "", a non-empty key, and the ip when one is expected."""
    problems = []
    if not isinstance(info, dict):
        return ["the connection info is not a JSON object: %r" % (info,)]
    if set(info) != CONN_KEYS:
        problems.append("keys %s, expected %s (missing %s, extra %s)" % (
            sorted(info), sorted(CONN_KEYS), sorted(CONN_KEYS - set(info)), sorted(set(info) - CONN_KEYS)))
    for k in INT_KEYS:
        v = info.get(k)
        if not isinstance(v, int) or isinstance(v, bool):
            problems.append("%s is %r, not an integer" % (k, v))
    ports = [info.get(k) for k in PORT_KEYS + ("comm_port",)]
    if all(isinstance(p, int) for p in ports):
        if not all(0 < p < 65536 for p in ports):
            problems.append("a port out of 1..65535: %r" % ports)
        if len(set(ports)) != len(ports):
            problems.append("the six ports are not distinct: %r" % ports)
    if info.get("kernel_id") != kernel_id:
        problems.append("kernel_id %r, expected %r" % (info.get("kernel_id"), kernel_id))
    if info.get("signature_scheme") != "hmac-sha256":
        problems.append("signature_scheme %r" % (info.get("signature_scheme"),))
    if info.get("transport") != "tcp":
        problems.append("transport %r" % (info.get("transport"),))
    if info.get("kernel_name") != "":
        problems.append("kernel_name %r, expected \"\"" % (info.get("kernel_name"),))
    if not isinstance(info.get("key"), str) or not info.get("key"):
        problems.append("key %r is not a non-empty string" % (info.get("key"),))
    if ip is not None and info.get("ip") != ip:
        problems.append("ip %r, expected %r" % (info.get("ip"), ip))
    return problems


# ---- the response socket ----------------------------------------------------------------------------------


class FakeGateway:
    """The gateway's response socket, served by a thread: every connection is read to EOF and decoded.

    host: the address to listen on (127.0.0.1 by default).  private_key: a key pair of its own (default: the
    test process's shared one).  listen=False binds the port without listening, so that connections to it are
    refused until start_listening()."""

    #: How long one connection may take to reach EOF before it is given up (the receivers have no such limit;
    #: here a launcher that never closes must not hang the test).
    CONNECTION_TIMEOUT = 10.0

    def __init__(self, host="127.0.0.1", private_key=None, listen=True):
        self.private_key = private_key or shared_private_key()
        self.public_key = public_key_string(self.private_key)
        self.host = host
        self.deliveries = queue.Queue()
        self.received = []
        self._stop = threading.Event()
        self._thread = None
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self.port = self._sock.getsockname()[1]
        if listen:
            self.start_listening()

    @property
    def response_address(self):
        return "%s:%d" % (self.host, self.port)

    def start_listening(self):
        self._sock.listen(128)
        self._sock.settimeout(0.1)
        self._thread = threading.Thread(target=self._serve, name="fake-gateway-%d" % self.port, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, peer = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with conn:
                d = self._read(conn, peer)
            self.received.append(d)
            self.deliveries.put(d)

    def _read(self, conn, peer):
        conn.settimeout(0.5)
        deadline = time.monotonic() + self.CONNECTION_TIMEOUT
        data = ""
        while True:
            try:
                chunk = conn.recv(1024)
            except socket.timeout:
                if time.monotonic() > deadline or self._stop.is_set():
                    d = Delivery(peer, data)
                    d.error = "no EOF within %ss after %d bytes" % (self.CONNECTION_TIMEOUT, len(data))
                    return d
                continue
            except OSError as e:
                d = Delivery(peer, data)
                d.error = "reading the connection failed: %s" % e
                return d
            if not chunk:
                break
            # The receivers decode each chunk as it comes; a base64 payload is ASCII, so that is safe.
            data += chunk.decode("utf-8")
        d = decode_payload(data, self.private_key)
        d.peer = peer
        return d

    def wait_delivery(self, timeout=30.0, launcher=None):
        """The next connection's Delivery; None when none came within timeout, or (sooner) when launcher, a
        Launcher, has exited and nothing is queued."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                return self.deliveries.get(timeout=0.1)
            except queue.Empty:
                pass
            if launcher is not None and launcher.proc.poll() is not None:
                try:
                    return self.deliveries.get(timeout=0.5)
                except queue.Empty:
                    return None
        return None

    def close(self):
        self._stop.set()
        try:
            self._sock.close()
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(timeout=self.CONNECTION_TIMEOUT + 2)


# ---- the communication port ---------------------------------------------------------------------------------


def send_listener_request(ip, port, request, shutdown_socket=False, timeout=SOCKET_TIMEOUT, attempts=20):
    """Sends one request to a launcher's communication port the way the gateways do: a fresh connection with a
    short socket timeout (5 ms), the JSON text, shutdown(SHUT_WR) when shutdown_socket (the gateways do this
    for {"shutdown": 1}), close.

    request is a dict (sent as json.dumps(request)) or bytes (sent as they are).  A connect that times out is
    tried again, up to `attempts` times (a loaded machine can miss 5 ms; the gateways would try on their next
    poll).  A refused connection raises ConnectionRefusedError, as it does in the gateways (which then treat
    the launcher as gone).  An ENOTCONN on shutdown is ignored, as the gateways ignore it."""
    data = request if isinstance(request, bytes) else json.dumps(request).encode("utf-8")
    for attempt in range(attempts):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            try:
                sock.connect((ip, port))
            except socket.timeout:
                time.sleep(0.05)
                continue
            sent = sock.send(data)
            assert sent == len(data), "sent %d of %d bytes to the comm port" % (sent, len(data))
            if shutdown_socket:
                try:
                    sock.shutdown(socket.SHUT_WR)
                except OSError as e:
                    if e.errno != errno.ENOTCONN:
                        raise
            return
        finally:
            sock.close()
    raise TimeoutError("the comm port %s:%d did not accept a connection in %d tries of %ss" % (
        ip, port, attempts, timeout))


def connection_refused(ip, port, timeout=2.0):
    """True if a connection to ip:port is refused (ECONNREFUSED), False if it is accepted; other errors
    (a timeout included) raise."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect((ip, port))
    except ConnectionRefusedError:
        return True
    finally:
        sock.close()
    return False


def wait_refused(ip, port, timeout=5.0):
    """Polls until connections to ip:port are refused; returns whether they were within timeout."""
    deadline = time.monotonic() + timeout
    while True:
        if connection_refused(ip, port):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


# ---- processes ----------------------------------------------------------------------------------------------


def cmdline_of(pid):
    """The argv of a live process (a list of str), [] when it is gone."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return []


def ppid_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[-1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def listening_sockets(pid):
    """The IPv4 (address, port) pairs in state LISTEN in the network namespace of process pid."""
    found = set()
    with open("/proc/%d/net/tcp" % pid) as f:
        next(f)
        for line in f:
            fields = line.split()
            local, state = fields[1], fields[3]
            if state != TCP_LISTEN:
                continue
            addr_hex, port_hex = local.split(":")
            octets = [str(int(addr_hex[i:i + 2], 16)) for i in range(6, -1, -2)]  # little-endian
            found.add((".".join(octets), int(port_hex, 16)))
    return found


def wait_gone(pid, timeout=10.0):
    """Waits until process pid is gone (or a zombie); returns whether it went within timeout."""
    deadline = time.monotonic() + timeout
    while pyctest.pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def launcher_env(tmpdir, extra=None):
    """The environment of a launcher: the isolated Jupyter dirs and HOME of the test session
    (pyctest.child_env), TMPDIR, none of the variables a launcher reads unless the test sets them."""
    env = pyctest.child_env()
    for k in list(env):
        if k in _LAUNCHER_VARS or k.startswith(_LAUNCHER_PREFIXES):
            del env[k]
    env["TMPDIR"] = tmpdir
    env.update(extra or {})
    return env


class Launcher:
    """`pyc-kernel gateway-launch ARGS` started as a subprocess in a session of its own, with a TMPDIR of its
    own (made under base_dir) and its stderr and stdout in a log file.  prefix: words before the program (e.g.
    ["ip", "netns", "exec", NS], which execs it in place).  Every pid is registered with pyctest; stop() ends
    the kernel (once its pid is known, or found by the TMPDIR in its environment) and the launcher by pid."""

    def __init__(self, args, base_dir, env=None, prefix=None):
        self.tmpdir = os.path.join(str(base_dir), "launcher-tmp")
        os.makedirs(self.tmpdir, exist_ok=True)
        self.log_path = pyctest.new_log_path("gateway-launch")
        self.argv = list(prefix or []) + [PYC_KERNEL, "gateway-launch"] + [str(a) for a in args]
        self.env = launcher_env(self.tmpdir, env)
        self.kernel_pid = None
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env,
                                         start_new_session=True)
        pyctest.register_pid(self.proc.pid)

    @property
    def pid(self):
        return self.proc.pid

    def adopt_kernel(self, pid):
        """Takes responsibility for the kernel whose pid came in the payload."""
        if isinstance(pid, int) and pid > 0:
            self.kernel_pid = pid
            pyctest.register_pid(pid)

    def wait(self, timeout):
        """The launcher's exit code, or None if it still runs after timeout seconds."""
        return pyctest.wait_exit(self.proc, timeout)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def describe(self):
        """The launcher's command, state and log, for assertion messages."""
        rc = self.proc.poll()
        return "\n$ %s\nlauncher pid %d %s, kernel pid %s\n--- launcher log ---\n%s" % (
            " ".join(self.argv), self.pid, "running" if rc is None else "exited %d" % rc, self.kernel_pid,
            self.log()[-4000:])

    def leftovers(self):
        """Live processes other than the launcher itself that name this launcher's TMPDIR (the kernel it
        started has it in its environment, and its registration file there on its command line)."""
        return {pid: cmd for pid, cmd in pyctest.processes_naming(self.tmpdir).items() if pid != self.pid}

    def stop(self):
        """Ends the kernel and the launcher by pid (SIGKILL), then anything still naming the TMPDIR."""
        if self.kernel_pid:
            pyctest.kill_pid(self.kernel_pid)
        if self.proc.poll() is None:
            pyctest.kill_pid(self.proc.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for pid in self.leftovers():
            pyctest.register_pid(pid)
            pyctest.kill_pid(pid)

    def signal(self, sig):
        os.kill(self.proc.pid, sig)


# ---- the Jupyter side -----------------------------------------------------------------------------------------


def kernel_client(info, ip, timeout=30):
    """What a gateway does with the decoded connection info: set its ip (the launcher's host), then
    BlockingKernelClient.load_connection_info and wait_for_ready.  The heartbeat channel is not started: a
    loaded machine can miss heartbeats, and a client without a manager judges the kernel dead by them (the
    heartbeat port is checked on its own by heartbeat_echoes)."""
    from jupyter_client import BlockingKernelClient

    ci = dict(info)
    ci["ip"] = ip
    kc = BlockingKernelClient()
    kc.load_connection_info(ci)
    kc.start_channels(hb=False)
    try:
        kc.wait_for_ready(timeout=timeout)
    except BaseException:
        kc.stop_channels()
        raise
    return kc


def heartbeat_echoes(ip, port, timeout=10.0):
    """True if the heartbeat port echoes a ping within timeout."""
    import zmq

    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.REQ)
    sock.linger = 0
    try:
        sock.connect("tcp://%s:%d" % (ip, port))
        sock.send(b"pyc-gateway-ping")
        if not sock.poll(int(timeout * 1000)):
            return False
        return sock.recv() == b"pyc-gateway-ping"
    finally:
        sock.close(0)


def receive(gateway, launcher, kernel_id, ip="127.0.0.1", timeout=START_TIMEOUT):
    """The decoded connection info of the launcher's payload, checked as a whole: the wrapper is version 1
    with exactly "version", "key" and "conn_info", the RSA ciphertext is one RSA-1024 block, the AES key is 16
    bytes, and the connection info is what an upstream launcher sends (connection_info_problems).
    The kernel's pid is handed to the launcher's finalizer before anything is asserted on it."""
    d = gateway.wait_delivery(timeout, launcher)
    assert d is not None, "no payload reached the gateway within %ss%s" % (timeout, launcher.describe())
    if isinstance(d.info, dict):
        launcher.adopt_kernel(d.info.get("pid"))
    assert d.error is None, "the payload does not decode the way the gateways decode it: %s\nraw: %r%s" % (
        d.error, d.raw[:300], launcher.describe())
    assert set(d.outer) == {"version", "key", "conn_info"}, "payload wrapper keys %s" % sorted(d.outer)
    assert len(d.key_ct) == KEY_SIZE // 8, "the encrypted AES key is %d bytes" % len(d.key_ct)
    assert len(d.aes_key) == 16, "the AES key is %d bytes, not 16 (AES-128)" % len(d.aes_key)
    problems = connection_info_problems(d.info, kernel_id, ip)
    assert not problems, "connection info %r:\n  %s%s" % (d.info, "\n  ".join(problems), launcher.describe())
    return d.info


def run_one_plus_one(kc, after_error=False):
    """Runs "1+1" and checks that its result is 2.  after_error: the kernel is not pyc and its last cell
    failed; ipykernel aborts what arrives until it has drained its queue, so an aborted reply is retried (as
    pyctest.execute does for other kernels)."""
    for _ in range(5 if after_error else 1):
        reply, msgs = pyctest.execute(kc, "1+1")
        if reply["content"]["status"] != "aborted":
            break
        time.sleep(0.2)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert pyctest.result_text(msgs) == "2", pyctest.summarize(msgs)


def start_sleeping_cell(kc, seconds=30):
    """Sends a cell that sleeps and returns its msg_id once the cell runs (its execute_input came, and half a
    second more: it is in time.sleep then), for the tests of interrupts."""
    msg_id = kc.execute("import time; time.sleep(%d)" % seconds)
    assert pyctest.wait_running(kc, msg_id, timeout=pyctest.TIMEOUT, settle=0.5), (
        "no execute_input for the sleeping cell within %ss" % pyctest.TIMEOUT)
    return msg_id


def gateway_shutdown(kc, launcher, info, ip, comm=True, timeout=15):
    """A gateway's shutdown of its kernel: shutdown_request on control, then at once (comm=True, what both
    gateways do) {"shutdown": 1} with SHUT_WR on the communication port, which the launcher may already have
    closed when the kernel ended -- the gateways take ECONNREFUSED as "already gone", and so does this.  Checks
    that the reply is ok, the launcher exits 0, the kernel is gone and the port refuses connections."""
    shutdown_id = pyctest.send(kc, "shutdown_request", {"restart": False}, channel="control")
    if comm:
        try:
            send_listener_request(ip, info["comm_port"], {"shutdown": 1}, shutdown_socket=True)
        except ConnectionRefusedError:
            pass
    reply = pyctest.get_reply(kc, shutdown_id, channel="control", timeout=timeout)
    assert reply["content"]["status"] == "ok", reply["content"]
    rc = launcher.wait(timeout)
    assert rc == 0, "launcher exit %s after the shutdown%s" % (rc, launcher.describe())
    assert wait_gone(info["pid"], 5), "the kernel outlived its launcher"
    assert connection_refused(ip, info["comm_port"]), "the comm port still accepts connections"


def sigkill(pid):
    """SIGKILL one process by pid, ignoring one that is already gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

