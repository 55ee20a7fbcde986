"""The test run's own port bands (tests/testports.py): kernels started through jupyter_client in a pytest
worker get ports that no other worker and no outgoing connection can be given, so a kernel never loses its
ports between jupyter_client choosing them and the kernel binding them."""

import os
import socket

import pytest

import testports
from pyctest import Kernel, execute, stream_text


def test_worker_shares_are_disjoint_and_below_the_ephemeral_range():
    end = min(testports.BAND_END, testports.ephemeral_start())
    shares = [testports.worker_share("gw%d" % i, 6, end) for i in range(6)]
    ports = [set(range(first, first + size)) for first, size in shares]
    for i, a in enumerate(ports):
        assert len(a) >= testports.MIN_SHARE
        assert max(a) < end and min(a) >= testports.BAND_START
        for b in ports[i + 1:]:
            assert not a & b
    # Outside pytest-xdist one process has the whole band.
    assert testports.worker_share("", 1, end) == (testports.BAND_START, end - testports.BAND_START)
    # A share too small to be worth it leaves jupyter_client alone.
    assert testports.worker_share("gw0", 1000, end) is None


def test_a_band_passes_over_a_port_in_use_and_wraps_around():
    band = testports.PortBand(testports.BAND_START, testports.MIN_SHARE, seed=1)
    start = band.next
    held = socket.socket()
    try:
        held.bind(("127.0.0.1", band.first + start))
        held.listen(1)
        port = band.take("127.0.0.1")
        assert port != band.first + start
        assert band.first <= port < band.first + band.size
    finally:
        held.close()
    taken = [band.take("127.0.0.1") for _ in range(band.size)]
    assert all(band.first <= p < band.first + band.size for p in taken)


def test_kernels_get_their_ports_from_this_workers_band():
    band = testports.band
    if band is None:
        pytest.skip("the system's ephemeral range leaves no room for port bands")
    k = Kernel("pyc")
    try:
        info = k.km.get_connection_info()
        ports = [info[name] for name in testports.PORT_NAMES]
        assert len(set(ports)) == 5
        assert all(band.first <= p < band.first + band.size for p in ports), (ports, band.first, band.size)
        reply, msgs = execute(k.kc, "print('up')")
        assert stream_text(msgs) == "up\n"
    finally:
        k.shutdown(now=False)
    # A connection file written directly, with its ports left to be chosen, gets them from the band too.
    from jupyter_client.connect import write_connection_file
    path, cfg = write_connection_file(ip="127.0.0.1", key=b"k")
    try:
        assert all(band.first <= cfg[name] < band.first + band.size for name in testports.PORT_NAMES)
    finally:
        os.unlink(path)


def test_servers_and_port_ranges_of_the_tests_come_from_the_band_too():
    band = testports.band
    if band is None:
        pytest.skip("the system's ephemeral range leaves no room for port bands")
    port = testports.free_port()
    assert band.first <= port < band.first + band.size
    start = testports.free_run(12)
    assert band.first <= start and start + 12 <= band.first + band.size
    assert all(testports.PortBand.bindable("127.0.0.1", p) for p in range(start, start + 12))
