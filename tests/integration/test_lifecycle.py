"""Restart and shutdown (DESIGN.md section 3)."""

import time

import pytest

from pyctest import IS_PYC, execute, get_reply, pid_alive, result_text, send, stream_text


def test_restart_gives_fresh_namespace(fresh_kernel):
    k = fresh_kernel
    execute(k.kc, "before_restart = 1")
    old_pid = k.pid
    k.restart()
    assert k.pid != old_pid
    deadline = time.monotonic() + 10
    while pid_alive(old_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(old_pid), "the old kernel process is still alive after restart"
    reply, msgs = execute(k.kc, "before_restart")
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "NameError"
    reply, msgs = execute(k.kc, "6 * 7")
    assert result_text(msgs) == "42"
    assert reply["content"]["execution_count"] == 2


def _shutdown_via(k, channel, restart):
    kc = k.kc
    proc = k.process
    msg_id = send(kc, "shutdown_request", {"restart": restart}, channel=channel)
    reply = get_reply(kc, msg_id, channel=channel, timeout=10)
    assert reply["msg_type"] == "shutdown_reply"
    assert reply["content"]["status"] == "ok"
    assert reply["content"]["restart"] is restart
    try:
        code = proc.wait(timeout=10)
    except Exception:
        pytest.fail("kernel did not exit within 10 s of shutdown_request on %s" % channel)
    assert code == 0, "kernel exit code %r" % code


@pytest.mark.parametrize("channel", ["control", "shell"])
def test_shutdown_request(fresh_kernel, channel):
    _shutdown_via(fresh_kernel, channel, False)


def test_shutdown_request_restart_true(fresh_kernel):
    # the kernel answers and exits; restarting is the manager's business
    _shutdown_via(fresh_kernel, "control", True)


@pytest.mark.skipif(
    not IS_PYC,
    reason="pyc-only: ipykernel answers but exits only after the running cell ends (the manager kills it "
    "after its wait); pyc's control thread must end a busy kernel within its shutdown grace",
)
def test_shutdown_while_cell_runs(fresh_kernel):
    k = fresh_kernel
    k.kc.execute("import time\ntime.sleep(30)")
    time.sleep(0.5)
    proc = k.process
    t0 = time.monotonic()
    msg_id = send(k.kc, "shutdown_request", {"restart": False}, channel="control")
    reply = get_reply(k.kc, msg_id, channel="control", timeout=10)
    assert reply["content"]["status"] == "ok"
    try:
        proc.wait(timeout=15)
    except Exception:
        pytest.fail("kernel busy in a cell did not exit after shutdown_request")
    assert time.monotonic() - t0 < 15


def test_manager_graceful_shutdown(fresh_kernel):
    """KernelManager.shutdown_kernel(now=False) asks politely; the kernel must exit by itself (exit code 0),
    not be killed after the manager's wait."""
    k = fresh_kernel
    execute(k.kc, "print('bye')")
    proc = k.process
    k.kc.stop_channels()
    t0 = time.monotonic()
    k.km.shutdown_kernel(now=False)
    took = time.monotonic() - t0
    assert proc.returncode == 0, "exit code %r (killed by the manager?)" % proc.returncode
    assert took < 5, "graceful shutdown took %.1fs" % took


def test_execute_after_restart_via_manager_keeps_client_working(fresh_kernel):
    k = fresh_kernel
    execute(k.kc, "x_r = 1")
    k.restart(now=True)
    reply, msgs = execute(k.kc, "print('fresh')")
    assert stream_text(msgs) == "fresh\n"
