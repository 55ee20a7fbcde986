"""Interrupts (DESIGN.md section 3): interrupt_mode signal (SIGINT to the process group, from
KernelManager.interrupt_kernel) and message (interrupt_request on control)."""

import time
from queue import Empty

import pytest

import pyctest
from pyctest import (IS_PYC, eval_value, execute, get_reply, iopub_for, outputs, send, stream_text, summarize,
                     wait_running)

# sum(range(10**10)) is NOT used: CPython's builtin sum() never checks for signals, so no kernel can stop it
# promptly.  A catastrophic regular expression is a C-level busy loop that does check (_sre polls signals).
BUSY = {
    "sleep": "import time\ntime.sleep(30)",
    "python-loop": "while True:\n    pass",
    "c-regex": "import re\nre.match(r'(x+x+)+y', 'x' * 64)",
    "event-wait": "import threading\nthreading.Event().wait(30)",
}


def run_and_interrupt(k, code, interrupt):
    kc = k.kc
    execute(kc, "marker_before = 'intact'")
    msg_id = kc.execute(code)
    wait_running(kc, msg_id)
    t0 = time.monotonic()
    interrupt()
    reply = get_reply(kc, msg_id, timeout=15)
    took = time.monotonic() - t0
    msgs = iopub_for(kc, msg_id, check=False)
    c = reply["content"]
    assert c["status"] == "error", c
    assert c["ename"] == "KeyboardInterrupt"
    assert took < 5.0, "interrupt took %.1fs" % took
    assert [m["content"]["ename"] for m in outputs(msgs, "error")] == ["KeyboardInterrupt"], summarize(msgs)
    assert msgs[-1]["content"]["execution_state"] == "idle"
    # namespace intact, kernel answers
    assert eval_value(kc, "marker_before") == "'intact'"
    reply, msgs = execute(kc, "print('after interrupt')")
    assert reply["content"]["status"] == "ok"
    assert stream_text(msgs) == "after interrupt\n"


@pytest.mark.parametrize("what", list(BUSY))
def test_signal_interrupt(fresh_kernel, what):
    k = fresh_kernel
    run_and_interrupt(k, BUSY[what], k.km.interrupt_kernel)


def test_interrupt_while_idle_is_harmless(fresh_kernel):
    k = fresh_kernel
    kc = k.kc
    execute(kc, "idle_marker = 1")
    for _ in range(3):
        k.km.interrupt_kernel()
        time.sleep(0.2)
    time.sleep(0.5)
    # nothing stray was published
    stray = []
    while True:
        try:
            m = kc.get_iopub_msg(timeout=0.3)
        except Empty:
            break
        if m["msg_type"] in ("error", "stream"):
            stray.append(m)
    assert stray == [], summarize(stray)
    reply, msgs = execute(kc, "import time\ntime.sleep(0.5)\nprint(idle_marker)")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stream_text(msgs) == "1\n"
    assert k.is_alive()


def test_interrupt_then_interrupt_again(fresh_kernel):
    k = fresh_kernel
    run_and_interrupt(k, BUSY["sleep"], k.km.interrupt_kernel)
    run_and_interrupt(k, BUSY["python-loop"], k.km.interrupt_kernel)


def test_interrupt_leaves_queued_requests_alone(fresh_kernel):
    """The interrupted cell gets KeyboardInterrupt; a request queued behind it is then aborted or run, but
    it gets a reply and the kernel goes on."""
    k = fresh_kernel
    kc = k.kc
    first = kc.execute("import time\ntime.sleep(30)")
    second = kc.execute("print('second')")
    wait_running(kc, first)
    k.km.interrupt_kernel()
    r1 = get_reply(kc, first, timeout=15)
    r2 = get_reply(kc, second, timeout=15)
    assert r1["content"]["ename"] == "KeyboardInterrupt"
    assert r2["content"]["status"] in ("ok", "aborted")
    reply, msgs = execute(kc, "print('goes on')")
    assert stream_text(msgs) == "goes on\n"


def test_message_interrupt_on_control(msg_kernel):
    k = msg_kernel
    assert k.km.kernel_spec.interrupt_mode == "message"
    kc = k.kc

    def interrupt():
        rid = send(kc, "interrupt_request", {}, channel="control")
        r = get_reply(kc, rid, channel="control", timeout=10)
        assert r["msg_type"] == "interrupt_reply"
        if IS_PYC:  # ipykernel 6 echoes the request content, without status
            assert r["content"]["status"] == "ok"

    run_and_interrupt(k, BUSY["sleep"], interrupt)
    run_and_interrupt(k, BUSY["python-loop"], interrupt)


def test_message_interrupt_via_manager(msg_kernel):
    k = msg_kernel
    run_and_interrupt(k, BUSY["sleep"], k.km.interrupt_kernel)


SLOW_LINECACHE = """
import sys, time
class _SlowLinecache:
    # Makes the first cell's import of linecache (the kernel's own work before the cell's first bytecode)
    # take 1.5 s, so that an interrupt surely comes during it.
    def find_spec(self, name, path=None, target=None):
        if name == "linecache":
            time.sleep(1.5)
        return None
sys.modules.pop("linecache", None)
sys.meta_path.insert(0, _SlowLinecache())
"""


def test_an_interrupt_during_the_kernels_work_before_the_first_bytecode_reaches_the_cell(tmp_path):
    """An interrupt_request that comes while the kernel prepares a cell (here the first cell's import of
    linecache, made slow by a start-up file) interrupts that cell: the kernel's own code caught the
    KeyboardInterrupt and the cell slept on (cli's test_interrupt_with_pyc_int, 20 ms after a `pyc new`,
    under load)."""
    startup = tmp_path / "startup.py"
    startup.write_text(SLOW_LINECACHE)
    k = pyctest.Kernel("pyc", env={"PYTHONSTARTUP": str(startup)})
    try:
        msg_id = k.kc.execute("import time; time.sleep(30)")
        busy = False
        deadline = time.monotonic() + 10
        while not busy and time.monotonic() < deadline:    # busy: the cell is armed, before the import
            r, _ = pyctest.request(k.kc, "usage_request", {}, channel="control")
            busy = r["content"].get("pyc", {}).get("execution_state") == "busy"
        if IS_PYC:
            assert busy
        time.sleep(0.3)
        t0 = time.monotonic()
        pyctest.request(k.kc, "interrupt_request", {}, channel="control")
        reply = get_reply(k.kc, msg_id, timeout=40)
        took = time.monotonic() - t0
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt", (
            reply["content"])
        assert took < 10, "the interrupt took %.1f s" % took
    finally:
        k.shutdown()


@pytest.mark.parametrize("how", ["blocked", "ignored"])
def test_a_kernel_launched_with_sigint_blocked_or_ignored_is_interrupted(how):
    """A launcher that had SIGINT blocked (a thread's mask) or ignored (a background job of a non-interactive
    shell, nohup) hands that on through exec: the kernel unblocks SIGINT and SIGTERM itself and gives SIGINT
    its default action before CPython starts (which otherwise leaves an ignored SIGINT ignored, and
    PyErr_SetInterrupt does nothing), or an interrupt would wait forever.  Both failed before: 17-20
    interrupt and deadline tests of a suite run from a background job."""
    import signal as sig

    if not pyctest.IS_PYC:
        pytest.skip(pyctest.NOT_PYC_REASON)
    if how == "blocked":
        old = sig.pthread_sigmask(sig.SIG_BLOCK, {sig.SIGINT, sig.SIGTERM})
    else:
        old = sig.signal(sig.SIGINT, sig.SIG_IGN)
    try:
        k = pyctest.Kernel("pyc")
    finally:
        if how == "blocked":
            sig.pthread_sigmask(sig.SIG_SETMASK, old)
        else:
            sig.signal(sig.SIGINT, old)
    try:
        run_and_interrupt(k, BUSY["sleep"], k.km.interrupt_kernel)
    finally:
        k.shutdown(now=True)
