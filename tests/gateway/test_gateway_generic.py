"""`pyc-kernel gateway-launch ... -- ARGV`: the generic launcher, for a kernel that is not pyc (src/gateway/gateway.h,
step 2).  The kernel here is Debian's ipykernel, the reference kernel, started as a gateway's kernelspec would
start it: `-- /usr/bin/python3 -m ipykernel_launcher -f {connection_file}`, or without the placeholder (then
the launcher appends `-f FILE`).  Such a kernel cannot report the ports it bound, so the launcher picks them,
writes the connection file and waits until every port accepts a connection before it sends the payload.

Checked as in test_gateway_launch.py: the payload decodes as the gateways decode it and names the kernel's
pid; a cell runs through it; {"signum": 2} on the comm port interrupts a running cell; a control
shutdown_request ends kernel and launcher with the kernel's status (0) and leaves nothing.  A command that
cannot run ends the launcher at once with 127 (the shell's status for it) and sends no payload.
"""

import signal
import time
import uuid

import pytest

import pyctest
from fakegateway import gateway_shutdown, receive, run_one_plus_one, send_listener_request, start_sleeping_cell

LOOPBACK = "127.0.0.1"

IPYKERNEL = ["/usr/bin/python3", "-m", "ipykernel_launcher"]


def _have_ipykernel():
    import importlib.util
    return importlib.util.find_spec("ipykernel") is not None


pytestmark = pytest.mark.skipif(not _have_ipykernel(), reason="python3-ipykernel is not installed")


def _args(gateway, kernel_id, command):
    return ["--kernel-id", kernel_id, "--response-address", gateway.response_address,
            "--public-key", gateway.public_key, "--ip", LOOPBACK, "--"] + command


@pytest.mark.parametrize("placeholder", [True, False], ids=["connection_file-placeholder", "appended-f"])
def test_ipykernel_through_the_generic_launcher(gateway, launch, connect, placeholder):
    kid = str(uuid.uuid4())
    command = IPYKERNEL + (["-f", "{connection_file}"] if placeholder else [])
    launcher = launch(_args(gateway, kid, command))
    info = receive(gateway, launcher, kid)
    assert pyctest.pid_alive(info["pid"])
    cmdline = open("/proc/%d/cmdline" % info["pid"], "rb").read().split(b"\0")
    assert b"ipykernel_launcher" in cmdline, "the payload's pid is not the ipykernel: %r" % cmdline
    assert b"{connection_file}" not in cmdline, "the placeholder reached the kernel: %r" % cmdline
    kc = connect(info, LOOPBACK)
    run_one_plus_one(kc)

    # An interrupt the way a gateway sends one for interrupt_mode "signal".
    msg_id = start_sleeping_cell(kc)
    send_listener_request(LOOPBACK, info["comm_port"], {"signum": int(signal.SIGINT)})
    reply = pyctest.get_reply(kc, msg_id, timeout=15)
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt", (
        reply["content"])
    pyctest.iopub_for(kc, msg_id, check=False)
    run_one_plus_one(kc, after_error=True)

    gateway_shutdown(kc, launcher, info, LOOPBACK, comm=False)
    assert not launcher.leftovers(), launcher.describe()


def test_a_command_that_cannot_run_sends_nothing(gateway, launch):
    kid = str(uuid.uuid4())
    launcher = launch(_args(gateway, kid, ["/nonexistent/kernel", "-f", "{connection_file}"]))
    rc = launcher.wait(30)
    assert rc == 127, "launcher exit %s for a command that cannot run%s" % (rc, launcher.describe())
    log = launcher.log()
    assert log.count("cannot run /nonexistent/kernel: No such file or directory") == 1, (
        "not said once (a command that cannot run is not tried again)" + launcher.describe())
    time.sleep(0.2)
    assert gateway.received == [], "a payload was sent for a kernel that never ran"
    assert not launcher.leftovers(), launcher.describe()
