"""A jupyter_client kernel provisioner that starts kernels with the startup handshake of messaging protocol 5.6
(JEP 66), so that no port is picked, released and raced for.

Classic start: the launcher picks five free ports, closes them, writes them into a connection file and
starts the kernel, which binds them later; in between, any process may take one.  With the handshake the
launcher binds one ROUTER (the registration socket, kept for the provisioner's life, restarts included),
writes a registration file ({"kernel_id", "transport", "registration_ip", "registration_port",
"signature_scheme", "key"}) and starts the kernel on it; the kernel binds ports of its own choosing and
reports them in one signed single-frame content dict; this provisioner checks the signature and the
kernel_id, answers with a signed ACK, and hands jupyter_client (or jupyter_server) an ordinary connection.

Turn it on for a kernelspec with

    "metadata": {"kernel_provisioner": {"provisioner_name": "pyc-handshake-provisioner"}}

(`pyc-kernel install --handshake` writes it).  jupyter_client finds the class through the entry point
`pyc-handshake-provisioner` of the group `jupyter_client.kernel_provisioners`, which `make install` writes
beside the pyc_client package (pyc_client-VERSION.dist-info/entry_points.txt).  The kernel must speak the
handshake (pyc-kernel does; kernel_protocol_version "5.6" in its kernelspec says so).

Config (traitlets, e.g. in the kernelspec's "config"): registration_timeout, seconds to wait for the
kernel's report (default 30; the kernel's own exit without an ACK comes after PYC_REGISTRATION_TIMEOUT, 20).
"""

import asyncio
import hashlib
import hmac
import json
import os
import time

import zmq
from jupyter_client.launcher import launch_kernel
from jupyter_client.provisioning.local_provisioner import LocalProvisioner
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase
from traitlets import Float

DELIM = b"<IDS|MSG>"
PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def write_dist_info(site, version="0"):
    """Writes into the folder site (one on sys.path) the pyc_client-VERSION.dist-info through which
    jupyter_client finds this provisioner: what `make install` writes beside the package, for a pyc_client
    used from its source tree (the tests, the benchmarks)."""
    info = os.path.join(site, "pyc_client-%s.dist-info" % version)
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: pyc_client\nVersion: %s\n" % version)
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        f.write("[jupyter_client.kernel_provisioners]\n"
                "pyc-handshake-provisioner = pyc_client._provisioner:HandshakeProvisioner\n"
                "pyc-template-provisioner = pyc_client._template:TemplateProvisioner\n")


class HandshakeError(RuntimeError):
    """The kernel did not complete the handshake (it exited, or did not report in time)."""


def sign(key, scheme, data):
    """The HMAC of data as a messaging-spec signature (hex, as bytes); b"" when key is empty."""
    if not key:
        return b""
    digest = scheme.split("-", 1)[1] if scheme.startswith("hmac-") else "sha256"
    return hmac.new(key, data, getattr(hashlib, digest)).hexdigest().encode()


async def registration(sock, key, scheme, kernel_id, process, timeout, log):
    """Waits on the registration ROUTER sock for the signed report of the kernel kernel_id that process (a
    Popen) runs, answers it with a signed ACK, and returns {"transport", "key", "signature_scheme", and the
    five ports}.  Raises HandshakeError when the process exits first or nothing comes within timeout s."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise HandshakeError("the kernel exited (status %s) before reporting its ports" % process.returncode)
        if time.monotonic() > deadline:
            raise HandshakeError("the kernel did not report its ports within %g s" % timeout)
        if not sock.poll(0):
            await asyncio.sleep(0.002)
            continue
        frames = sock.recv_multipart()
        try:
            i = frames.index(DELIM)
            sig, content = frames[i + 1], frames[i + 2]
            report = json.loads(content)
        except (ValueError, IndexError):
            log.warning("registration: dropped a message that is not a signed content dict")
            continue
        if not hmac.compare_digest(sig, sign(key, scheme, content)):
            log.warning("registration: dropped a report with a bad signature")
            continue
        if report.get("kernel_id") != kernel_id:
            continue                    # an earlier start of this kernel, still reporting
        ack = json.dumps({"status": "ok", "kernel_id": kernel_id}).encode()
        sock.send_multipart(frames[:i] + [DELIM, sign(key, scheme, ack), ack])
        info = {"transport": "tcp", "key": key, "signature_scheme": scheme}
        for name in PORTS:
            info[name] = int(report[name])
        return info


class HandshakeProvisioner(LocalProvisioner):
    """LocalProvisioner's process handling, with the 5.6 handshake instead of pre-picked ports."""

    registration_timeout = Float(30.0, config=True, help="Seconds to wait for the kernel's report of its ports.")

    _sock = None
    _registration_file = None

    # -- helpers --

    def _key(self):
        key = self.parent.session.key
        return key if isinstance(key, bytes) else key.encode()

    def _socket(self, ip):
        """The registration socket, bound once and kept (a restart reports on the same port)."""
        if self._sock is None:
            self._sock = zmq.Context.instance().socket(zmq.ROUTER)
            self._sock.linger = 0
            self._port = self._sock.bind_to_random_port("tcp://%s" % ip)
        return self._sock

    # -- the provisioner's interface --

    async def pre_launch(self, **kwargs):
        km = self.parent
        if km.transport != "tcp":
            raise RuntimeError("the startup handshake is over tcp; this kernel manager uses %s" % km.transport)
        extra_arguments = kwargs.pop("extra_arguments", [])
        self._socket(km.ip)
        if not km.connection_file:
            # Where the kernel writes its connection file (kernel-KERNEL_ID.json beside the registration file)
            # is where jupyter_client looks for it.
            from jupyter_core.paths import jupyter_runtime_dir

            km.connection_file = os.path.join(jupyter_runtime_dir(), "kernel-%s.json" % self.kernel_id)
        directory = os.path.dirname(km.connection_file)
        os.makedirs(directory, exist_ok=True)
        self._registration_file = os.path.join(directory, "kernel-%s-registration.json" % self.kernel_id)
        registration = {"kernel_id": self.kernel_id, "transport": "tcp", "registration_ip": km.ip,
                        "registration_port": self._port, "signature_scheme": km.session.signature_scheme,
                        "key": self._key().decode()}
        fd = os.open(self._registration_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(registration, f)
        saved = km.connection_file
        km.connection_file = self._registration_file    # {connection_file} in argv names the registration file
        try:
            cmd = km.format_kernel_cmd(extra_arguments=extra_arguments)
        finally:
            km.connection_file = saved
        # LocalProvisioner.pre_launch would write a connection file with picked ports: skip to the base class.
        return await KernelProvisionerBase.pre_launch(self, cmd=cmd, **kwargs)

    async def launch_kernel(self, cmd, **kwargs):
        self.process = launch_kernel(cmd, **LocalProvisioner._scrub_kwargs(kwargs))
        self.pid = self.process.pid
        try:
            self.pgid = os.getpgid(self.pid)
        except OSError:
            self.pgid = None
        self.connection_info = await self._registration()
        return self.connection_info

    async def _registration(self):
        """Waits for this kernel's signed report, answers it, and returns the connection info."""
        km = self.parent
        info = await registration(self._sock, self._key(), km.session.signature_scheme, self.kernel_id,
                                  self.process, self.registration_timeout, self.log)
        info["ip"], info["kernel_name"] = km.ip, km.kernel_name
        # The kernel wrote its connection file where jupyter_client looks (km.connection_file), which
        # jupyter_client then keeps; the manager takes the ports from here (on a restart it still holds the
        # last kernel's, which load_connection_info would not replace).
        for name in PORTS:
            setattr(km, name, info[name])
        return info

    async def cleanup(self, restart=False):
        if self._registration_file is not None:
            try:
                os.unlink(self._registration_file)
            except FileNotFoundError:
                pass
        if not restart and self._sock is not None:
            self._sock.close(0)
            self._sock = None
        await super().cleanup(restart=restart)
