"""Ports for the kernels that the tests start through jupyter_client, chosen so that two processes of one test
run never race for a port.

jupyter_client picks a kernel's five TCP ports by binding a socket to port 0, reading the port the system gave
and closing the socket; the kernel binds that port later.  In between, any other process may be given the
same port: another pytest-xdist worker picking ports for its own kernel, or any outgoing connection, whose
local port comes from the same ephemeral range.  The kernel then exits with "Address already in use" and
the test fails with "Kernel died before replying to kernel_info".  With six workers starting hundreds of
kernels, that happened about once in every few CI runs.

install() makes the jupyter_client of this process take its ports from a band of its own instead: the
ports below the system's ephemeral range are split among the workers of the run, each worker walks through
its share in order (from a place drawn from its pid, so that two runs at once seldom walk in step), and a
port is handed out only if a test bind of it succeeds.  No port of the band is given to anybody by the
system, and no two workers share one, so the window between choosing and binding is no longer a race.
Processes that the tests start (jupyter server, nbconvert, console) still choose their kernels' ports the
usual way; the tests that use them retry a start that lost that race.
"""

import os
import random
import socket

#: The highest port of the bands; the bands end below the ephemeral range if that starts lower.
BAND_END = 32000
#: The lowest port used, clear of the well-known and common service ports.
BAND_START = 20000
#: The fewest ports a worker's share may have; a smaller share means the system's range is odd, and then
#: jupyter_client is left as it is.
MIN_SHARE = 200


def ephemeral_start():
    """The first port of the system's ephemeral range (Linux), or 32768, its default, if it is not known."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def worker_share(worker=None, count=None, end=None):
    """(first port, number of ports) of this pytest-xdist worker's share of the band, or None if the share
    would be smaller than MIN_SHARE.  worker is "gwN" (PYTEST_XDIST_WORKER) or "" outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "") if worker is None else worker
    if count is None:
        try:
            count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        except ValueError:
            count = 1
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    end = min(BAND_END, ephemeral_start()) if end is None else end
    size = (end - BAND_START) // max(count, index + 1, 1)
    if size < MIN_SHARE:
        return None
    return BAND_START + index * size, size


class PortBand:
    """Hands out the free ports of one share in turn.  A port is free if this process can bind it, on the
    address the kernel will bind, without SO_REUSEADDR (so a port with connections still in TIME_WAIT is
    passed over as well)."""

    def __init__(self, first, size, seed=None):
        self.first = first
        self.size = size
        self.next = random.Random(os.getpid() if seed is None else seed).randrange(size)

    def take(self, ip=""):
        for _ in range(self.size):
            port = self.first + self.next
            self.next = (self.next + 1) % self.size
            if self.bindable(ip or "127.0.0.1", port):
                return port
        raise RuntimeError("no free port in %d..%d" % (self.first, self.first + self.size - 1))

    def take_run(self, n, ip=""):
        """The first of n consecutive free ports of the share (for a kernel's PYC_PORT_RANGE)."""
        for _ in range(self.size):
            start = self.first + self.next
            if self.next + n > self.size:
                self.next = 0
                continue
            if all(self.bindable(ip or "127.0.0.1", p) for p in range(start, start + n)):
                self.next = (self.next + n) % self.size
                return start
            self.next = (self.next + 1) % self.size
        raise RuntimeError("no %d free ports in a row in %d..%d" % (n, self.first, self.first + self.size - 1))

    @staticmethod
    def bindable(ip, port):
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.bind((ip, port))
            return True
        except OSError:
            return False
        finally:
            sock.close()


PORT_NAMES = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")

#: The band of this process once install() has run.
band = None


def install():
    """Makes jupyter_client (7.4 and 8.x) in this process take kernel ports from this worker's band: both
    where a KernelManager's provisioner picks them (LocalPortCache) and where a connection file is written
    with some ports left at 0.  Returns the band, or None if jupyter_client is not importable or the band
    would be too small; calling it again changes nothing."""
    global band
    if band is not None:
        return band
    share = worker_share()
    if share is None:
        return None
    try:
        from jupyter_client import connect
    except ImportError:
        return None
    band = PortBand(*share)

    def find_available_port(cache, ip):
        # LocalPortCache's contract: a port handed out is not handed out again until it is returned.
        for _ in range(band.size):
            port = band.take(ip)
            if port not in cache.currently_used_ports:
                cache.currently_used_ports.add(port)
                return port
        raise RuntimeError("every free port of %d..%d is handed out already" % (band.first,
                                                                               band.first + band.size - 1))

    connect.LocalPortCache.find_available_port = find_available_port
    original = connect.write_connection_file

    def write_connection_file(fname=None, *args, **kwargs):
        if not args and kwargs.get("transport", "tcp") == "tcp":
            for name in PORT_NAMES:
                if kwargs.get(name, 0) <= 0:
                    kwargs[name] = band.take(kwargs.get("ip", ""))
        return original(fname, *args, **kwargs)

    write_connection_file.__doc__ = original.__doc__
    connect.write_connection_file = write_connection_file
    return band


def free_port(ip="127.0.0.1"):
    """A free port for a server or a kernel a test starts itself: from this worker's band once install() has
    run, else one the system picks (racy: released before the caller binds it)."""
    if band is not None:
        return band.take(ip)
    sock = socket.socket()
    try:
        sock.bind((ip, 0))
        return sock.getsockname()[1]
    finally:
        sock.close()


def free_run(n, ip="127.0.0.1"):
    """The first of n consecutive free ports (a port range for a kernel), from this worker's band once
    install() has run, else from 20000-40000 as the system allows."""
    if band is not None:
        return band.take_run(n, ip)
    import random

    for _ in range(1000):
        start = random.randrange(20000, 40000 - n)
        if all(PortBand.bindable(ip, p) for p in range(start, start + n)):
            return start
    raise RuntimeError("no %d free ports in a row" % n)
