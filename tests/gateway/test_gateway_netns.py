"""`pyc-kernel gateway-launch` across hosts: the "pod" is a network namespace of its own, joined to the test's
namespace (the "gateway host") by a veth pair, as a Kubernetes pod is joined to the node that runs the gateway.

The launcher runs in the pod namespace (`ip netns exec NS`, which execs it in place) without --ip, so the
kernel's five ports and the comm port bind 0.0.0.0; the fake gateway listens on the host end of the veth.  The
test checks what only this setup shows: the payload comes from the pod's address, its ip is 0.0.0.0 and every
port listens on 0.0.0.0 in the pod; then, as a gateway does, it replaces the ip with the pod's address, runs a
cell across the veth, and sends {"signum": 0} and (after a control shutdown_request) {"shutdown": 1} to the comm
port across it.

Needs root and iproute2: skipped, with the reason, when the namespace or the veth pair cannot be made.  The
names carry the test process's pid; the veth pair and the namespace are removed when the test ends.
"""

import os
import shutil
import subprocess
import time
import uuid

import pytest

import fakegateway
import pyctest
from fakegateway import FakeGateway, gateway_shutdown, receive, run_one_plus_one, send_listener_request

def _ip(*args, timeout=10):
    return subprocess.run(["ip"] + list(args), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def pod_network():
    """A namespace "pyc-pod-PID" and a veth pair between it and this namespace, on a /30 of 10.213/16 chosen
    from the pid: {"ns", "host_ip", "pod_ip"}.  Removed when the test ends."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (euid %d)" % os.geteuid())
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2)")
    tag = os.getpid()
    ns = "pyc-pod-%d" % tag
    host_if, pod_if = "pycgw%d" % tag, "pycpod%d" % tag          # at most 15 characters
    net = "10.213.%d.%d" % ((tag >> 6) & 0xFF, (tag & 0x3F) << 2)
    base = net.rsplit(".", 1)
    host_ip = "%s.%d" % (base[0], int(base[1]) + 1)
    pod_ip = "%s.%d" % (base[0], int(base[1]) + 2)
    steps = [
        ("netns", "add", ns),
        ("link", "add", host_if, "type", "veth", "peer", "name", pod_if),
        ("link", "set", pod_if, "netns", ns),
        ("addr", "add", host_ip + "/30", "dev", host_if),
        ("link", "set", host_if, "up"),
        ("-n", ns, "addr", "add", pod_ip + "/30", "dev", pod_if),
        ("-n", ns, "link", "set", pod_if, "up"),
        ("-n", ns, "link", "set", "lo", "up"),
    ]
    try:
        for step in steps:
            try:
                r = _ip(*step)
            except (OSError, subprocess.TimeoutExpired) as e:
                pytest.skip("cannot make the pod network: ip %s: %s" % (" ".join(step), e))
            if r.returncode != 0:
                pytest.skip("cannot make the pod network: ip %s: %s" % (" ".join(step), r.stderr.strip()))
        yield {"ns": ns, "host_ip": host_ip, "pod_ip": pod_ip}
    finally:
        # Deleting one end of a veth pair deletes both; the namespace goes once its last process has gone.
        _ip("link", "del", host_if)
        _ip("netns", "del", ns)


def test_a_kernel_in_another_network_namespace(pod_network, launch, connect):
    ns, host_ip, pod_ip = pod_network["ns"], pod_network["host_ip"], pod_network["pod_ip"]
    gw = FakeGateway(host=host_ip)
    try:
        kid = str(uuid.uuid4())
        launcher = launch(["--kernel-id", kid, "--response-address", gw.response_address,
                           "--public-key", gw.public_key], prefix=["ip", "netns", "exec", ns])
        info = receive(gw, launcher, kid, ip="0.0.0.0")
        peer = gw.received[0].peer[0]
        assert peer == pod_ip, "the payload came from %s, not from the pod's address %s" % (peer, pod_ip)

        # Every port listens on 0.0.0.0 in the pod's namespace (the kernel's view of /proc/net/tcp).
        listening = fakegateway.listening_sockets(info["pid"])
        for name in fakegateway.PORT_KEYS + ("comm_port",):
            assert ("0.0.0.0", info[name]) in listening, "%s %d does not listen on 0.0.0.0 in the pod: %r" % (
                name, info[name], sorted(listening))

        # The gateway replaces ip with the pod's address and works across the veth.
        kc = connect(info, pod_ip)
        run_one_plus_one(kc)
        assert fakegateway.heartbeat_echoes(pod_ip, info["hb_port"]), "the heartbeat port does not echo"
        send_listener_request(pod_ip, info["comm_port"], {"signum": 0})
        time.sleep(0.2)
        assert launcher.proc.poll() is None and pyctest.pid_alive(info["pid"])
        run_one_plus_one(kc)

        gateway_shutdown(kc, launcher, info, pod_ip, timeout=10)
    finally:
        gw.close()
