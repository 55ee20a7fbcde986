"""CURVE transport encryption for jupyter_client 7.x, which knows nothing of it.

A connection file that holds `curve_publickey` and `curve_secretkey` (Z85 text, the names jupyter_client 8.9
and ipykernel 7.3 use) asks the kernel to make its five sockets CURVE servers: a client must then connect as a
CURVE client, with the kernel's public key as its server key, or it is never answered.  jupyter_client 7.4
(Debian 12's) creates plain sockets, so this module sets pyzmq's default socket options (curve_serverkey,
curve_publickey, curve_secretkey) on the ZeroMQ context a client or manager creates its sockets from; every
socket it makes afterwards (shell, iopub, stdin, control, heartbeat; a manager's own control socket) is a
CURVE client.

    import pyc_client
    km, kc = pyc_client.start_kernel("pyc")                 # new keys in the connection file, client set up
    kc = pyc_client.use_curve(km.client())                   # any other client of that kernel
    kc = pyc_client.use_curve(BlockingKernelClient(connection_file=path), client_keypair=(pub, sec))

The client's own key pair is the connection file's (as jupyter_client 8.9 does for all but the heartbeat), so
a kernel with an allow-list lets it in; a client that holds only the kernel's public key passes a key pair of
its own that is on the kernel's list (`client_keypair`, Z85 text; `zmq.curve_keypair()` makes one).
"""

import json
import os

__all__ = ["curve_info", "use_curve", "write_curve_keys", "start_kernel", "CurveKernelManager"]


def _text(v):
    return v.decode("ascii") if isinstance(v, bytes) else v


def curve_info(info):
    """The CURVE keys of a connection (a dict, or the path of a connection file): a dict with
    curve_publickey and curve_secretkey (Z85 text; the secret key may be missing from a file made for a
    client), or None when the connection is not encrypted."""
    if isinstance(info, (str, os.PathLike)):
        with open(info) as f:
            info = json.load(f)
    public = _text(info.get("curve_publickey") or "")
    if not public:
        return None
    return {"curve_publickey": public, "curve_secretkey": _text(info.get("curve_secretkey") or "")}


def use_curve(obj, info=None, client_keypair=None):
    """Makes every socket that obj (a KernelClient, a KernelManager, or a zmq.Context) creates from now on a
    CURVE client of its kernel; call it before start_channels().  info: the connection (dict or path); by
    default obj's connection_file.  client_keypair: (public, secret), Z85 text or bytes; by default the
    connection's own key pair.  Returns obj.  Raises ValueError when the connection has no CURVE keys, or
    neither a secret key nor client_keypair; RuntimeError when pyzmq's libzmq has no CURVE."""
    import zmq

    if not zmq.has("curve"):
        raise RuntimeError("this pyzmq's libzmq was built without CURVE: it cannot connect to an encrypted kernel")
    if info is None:
        info = getattr(obj, "connection_file", None)
        if not info:
            raise ValueError("use_curve: give the connection info (obj has no connection_file)")
    keys = curve_info(info)
    if keys is None:
        raise ValueError("use_curve: the connection has no curve_publickey: the kernel is not encrypted")
    if client_keypair is None:
        if not keys["curve_secretkey"]:
            raise ValueError("use_curve: the connection has no curve_secretkey: give client_keypair")
        client_keypair = (keys["curve_publickey"], keys["curve_secretkey"])
    ctx = obj if isinstance(obj, zmq.Context) else obj.context
    # A context's default options apply to the sockets it makes afterwards (pyzmq's Context.sockopts).
    ctx.curve_serverkey = keys["curve_publickey"].encode("ascii")
    ctx.curve_publickey = _text(client_keypair[0]).encode("ascii")
    ctx.curve_secretkey = _text(client_keypair[1]).encode("ascii")
    return obj


def write_curve_keys(path, keypair=None, allowed_clients=None):
    """Adds CURVE keys (a new pair unless keypair, Z85 public and secret, is given) and optionally
    curve_allowed_clients (pyc's allow-list: Z85 public keys of other clients) to the connection file at
    path, keeping it mode 0600.  Returns the key pair."""
    import zmq

    if keypair is None:
        keypair = zmq.curve_keypair()
    with open(path) as f:
        info = json.load(f)
    info["curve_publickey"], info["curve_secretkey"] = _text(keypair[0]), _text(keypair[1])
    if allowed_clients is not None:
        info["curve_allowed_clients"] = [_text(k) for k in allowed_clients]
    tmp = "%s.curve-%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f, indent=2)
    os.replace(tmp, path)
    return info["curve_publickey"], info["curve_secretkey"]


def _manager_class():
    from jupyter_client.manager import KernelManager

    class CurveKernelManager(KernelManager):
        """A KernelManager whose kernels are CURVE-encrypted: the connection file it writes gets a new key
        pair (and allowed_clients as pyc's allow-list), its own control socket and the clients it makes are
        CURVE clients."""

        allowed_clients = None

        def write_connection_file(self, **kwargs):
            written = self._connection_file_written
            super().write_connection_file(**kwargs)
            if not written and curve_info(self.connection_file) is None:
                write_curve_keys(self.connection_file, allowed_clients=self.allowed_clients)
            use_curve(self.context, self.connection_file)

        def client(self, **kwargs):
            return use_curve(super().client(**kwargs), self.connection_file)

    return CurveKernelManager


def __getattr__(name):
    if name == "CurveKernelManager":
        return _manager_class()
    raise AttributeError(name)


def start_kernel(kernel_name="pyc", startup_timeout=60, allowed_clients=None, **kwargs):
    """jupyter_client's start_new_kernel for a CURVE-encrypted kernel: returns (km, kc), kc's channels
    started and the kernel ready.  allowed_clients: Z85 public keys written as curve_allowed_clients."""
    km = _manager_class()(kernel_name=kernel_name)
    km.allowed_clients = allowed_clients
    km.start_kernel(**kwargs)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=startup_timeout)
        _wait_iopub(kc, startup_timeout)
    except RuntimeError:
        kc.stop_channels()
        km.shutdown_kernel()
        raise
    return km, kc


def _wait_iopub(kc, timeout):
    """Returns once kc's iopub subscription is in place: the kernel's iopub_welcome (JEP 65) has come, or the
    status of a kernel_info_request sent to find out.  (jupyter_client 7.4's wait_for_ready answers when shell
    does, and a CURVE handshake on iopub can take longer: output published before it would be lost.)"""
    import time
    from queue import Empty

    deadline, probe = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.2)
        except Empty:
            probe = kc.kernel_info()
            continue
        if msg["msg_type"] == "iopub_welcome" or (probe is not None and
                                                  msg["parent_header"].get("msg_id") == probe):
            return
    raise RuntimeError("the kernel's iopub did not answer within %s s" % timeout)
