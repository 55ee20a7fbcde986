"""Bounded, honest sessions (issue 5): the limits the C side keeps, the outcome metadata of every
execute_reply, usage_request, and checkpoints with replay.

Each limit is tested through jupyter_client on a kernel started with that limit in its environment (the way
a kernelspec's "env" sets it) or on its command line.  Durations are short but the assertions leave wide
margins: this machine is shared and slow at times, and these are behaviour tests, not timings.
"""

import json
import os
import subprocess
import time

import pytest

from pyctest import (IS_PYC, NOT_PYC_REASON, PYC_KERNEL, UNDER_ASAN, Deadline, Kernel, eval_value, execute,
                     get_reply, iopub_for, output_bytes, request, send, stream_text)

pytestmark = pytest.mark.skipif(not IS_PYC, reason=NOT_PYC_REASON)



def run(kc, code, metadata=None, timeout=60, **content):
    """execute_request with metadata; returns (reply, iopub messages from busy to idle)."""
    body = {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False,
            "stop_on_error": True}
    body.update(content)
    msg_id = send(kc, "execute_request", body, metadata=metadata)
    reply = get_reply(kc, msg_id, timeout=timeout)
    return reply, iopub_for(kc, msg_id, timeout=timeout)


def wait_dead(k, timeout):
    """Waits for the kernel process to end; returns its exit status (None when it did not end)."""
    proc = k.process
    dl = Deadline(timeout)
    while dl.left() > 0:
        rc = proc.poll()
        if rc is not None:
            return rc
        time.sleep(0.05)
    return None


@pytest.fixture
def limited():
    """Starts a kernel with the given PYC_* environment; ends it after the test."""
    started = []

    def start(extra_arguments=None, **env):
        k = Kernel(env={key: str(v) for key, v in env.items()}, extra_arguments=extra_arguments)
        started.append(k)
        return k

    yield start
    for k in started:
        k.shutdown(now=True)


# ---- outcome metadata --------------------------------------------------------------------------------------

def test_every_reply_carries_the_outcome(kc):
    reply, _ = run(kc, "import time\nsum(range(10**6))")
    md = reply["metadata"]["pyc"]
    assert md["outcome"] == "ok" and md["state"] == "intact"
    assert md["interrupted"] is False and md["timed_out"] is False and md["limit"] is None
    assert md["output_dropped"] is False and md["memory_cap_hit"] is False and md["kernel_ending"] is False
    assert md["output"]["messages"] == 1 and md["output"]["dropped_bytes"] == 0   # the execute_result
    assert 0 <= md["cpu_time"] < 30 and 0 < md["wall_time"] < 30

    reply, _ = run(kc, "1/0")
    md = reply["metadata"]["pyc"]
    assert reply["content"]["status"] == "error" and md["outcome"] == "error" and md["state"] == "intact"

    reply, _ = run(kc, "print('quiet')", silent=True)
    assert reply["metadata"]["pyc"]["outcome"] == "ok"


def test_cpu_time_is_the_cells(kc):
    reply, _ = run(kc, "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass")
    md = reply["metadata"]["pyc"]
    assert md["cpu_time"] >= 0.25 and md["wall_time"] >= 0.25
    reply, _ = run(kc, "import time\ntime.sleep(0.3)")
    md = reply["metadata"]["pyc"]
    assert md["wall_time"] >= 0.28 and md["cpu_time"] < 0.2


def test_interrupted_cell_says_so(msg_kernel):
    kc = msg_kernel.kc
    msg_id = send(kc, "execute_request", {"code": "import time\ntime.sleep(30)", "silent": False})
    time.sleep(0.5)
    get_reply(kc, send(kc, "interrupt_request", {}, channel="control"), channel="control")
    reply = get_reply(kc, msg_id, timeout=20)
    iopub_for(kc, msg_id)
    md = reply["metadata"]["pyc"]
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert md["outcome"] == "interrupted" and md["interrupted"] is True and md["timed_out"] is False
    assert md["state"] == "intact"


def test_bad_limit_in_metadata_is_refused(kc):
    reply, _ = run(kc, "1", metadata={"pyc": {"timeout": "soon"}})
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "BadRequest"
    assert "timeout" in reply["content"]["evalue"]
    md = reply["metadata"]["pyc"]
    assert md["outcome"] == "bad_request" and md["state"] == "intact" and md["kernel_ending"] is False
    assert md["output"]["messages"] == 0 and md["interrupted"] is False


# ---- per-cell deadline -------------------------------------------------------------------------------------

def test_deadline_interrupts_sleep_and_state_stays(kc):
    execute(kc, "dl_before = 'kept'")
    t = time.monotonic()
    reply, msgs = run(kc, "import time\ndl_partial = 1\ntime.sleep(60)\ndl_after = 1", metadata={"pyc": {"timeout": 1}})
    assert time.monotonic() - t < 20
    c = reply["content"]
    assert c["status"] == "error" and c["ename"] == "CellTimeout"
    assert "deadline of 1 s" in c["evalue"]
    assert any(m["msg_type"] == "error" and m["content"]["ename"] == "CellTimeout" for m in msgs)
    md = reply["metadata"]["pyc"]
    assert md["outcome"] == "timeout" and md["timed_out"] is True and md["limit"] == "deadline"
    assert md["interrupted"] is True and md["state"] == "intact" and md["kernel_ending"] is False
    assert eval_value(kc, "dl_before, dl_partial, 'dl_after' in globals()") == "('kept', 1, False)"


def test_kernel_deadline_from_the_environment(limited):
    k = limited(PYC_CELL_TIMEOUT="1")
    info = k.kernel_info()
    assert info["pyc"]["limits"]["cell_timeout"] == 1
    reply, _ = run(k.kc, "import time\ntime.sleep(30)")
    assert reply["content"]["ename"] == "CellTimeout"
    # a cell may tighten the kernel's deadline, never lift it
    t = time.monotonic()
    reply, _ = run(k.kc, "import time\ntime.sleep(30)", metadata={"pyc": {"timeout": 100}})
    assert reply["content"]["ename"] == "CellTimeout" and time.monotonic() - t < 15
    reply, _ = run(k.kc, "6*7")
    assert reply["content"]["status"] == "ok"


def test_stuck_cell_ends_the_kernel_after_telling_the_client(limited):
    k = limited(PYC_CELL_GRACE="1")
    kc = k.kc
    # A C loop that never checks for signals: sum over a huge range.
    t = time.monotonic()
    reply, msgs = run(kc, "sum(range(10**13))", metadata={"pyc": {"timeout": 1}})
    assert time.monotonic() - t < 30
    c = reply["content"]
    assert c["status"] == "error" and c["ename"] == "CellTimeout"
    assert "did not stop" in c["evalue"] and "state is lost" in c["evalue"]
    md = reply["metadata"]["pyc"]
    assert md["state"] == "lost" and md["kernel_ending"] is True and md["timed_out"] is True
    assert any(m["msg_type"] == "error" for m in msgs)
    assert wait_dead(k, 20) == 3
    assert any("did not stop within" in line for line in k.stderr_lines())


def test_deadline_on_an_isolated_cell_kills_only_the_child(kc):
    execute(kc, "iso_dl = 'before'")
    reply, _ = run(kc, "iso_dl = 'changed'\nwhile True: pass", metadata={"pyc": {"isolate": "fork", "timeout": 1}})
    assert reply["content"]["ename"] == "CellTimeout"
    md = reply["metadata"]["pyc"]
    assert md["outcome"] == "timeout" and md["isolated"] == "fork" and md["state"] == "intact"
    assert eval_value(kc, "iso_dl") == "'before'"


# ---- per-cell CPU time -----------------------------------------------------------------------------------

# A busy loop that ends by itself after `s` seconds of CPU, so that a kernel that does not keep the limit
# fails the test instead of hanging it.
def busy(s=20):
    return "import time\n_t = time.process_time()\nwhile time.process_time() - _t < %g: pass" % s


def test_cpu_limit_stops_a_busy_cell_not_a_sleeping_one(limited):
    k = limited(PYC_CELL_CPU="0.5")
    kc = k.kc
    assert k.kernel_info()["pyc"]["limits"]["cell_cpu"] == 0.5
    # Sleeping spends wall time, not CPU: six times the limit of it is fine.
    reply, _ = run(kc, "import time\ntime.sleep(3)\n'slept'")
    assert reply["content"]["status"] == "ok"
    assert reply["metadata"]["pyc"]["wall_time"] >= 2.9 and reply["metadata"]["pyc"]["limit"] is None
    t = time.monotonic()
    reply, msgs = run(kc, "cpu_partial = 1\n" + busy() + "\ncpu_after = 1")
    assert time.monotonic() - t < 18
    c = reply["content"]
    assert c["status"] == "error" and c["ename"] == "CellCPUTimeout", c
    assert "CPU time limit of 0.5 s" in c["evalue"] and "the kernel goes on" in c["evalue"]
    assert any(m["msg_type"] == "error" and m["content"]["ename"] == "CellCPUTimeout" for m in msgs)
    md = reply["metadata"]["pyc"]
    assert md["outcome"] == "timeout" and md["limit"] == "cpu" and md["timed_out"] is True
    assert md["interrupted"] is True and md["state"] == "intact" and md["kernel_ending"] is False
    assert md["cpu_time"] >= 0.45
    # the session goes on, with what the cell did before it was stopped
    assert eval_value(kc, "cpu_partial, 'cpu_after' in globals()") == "(1, False)"
    # CPU spent by a thread counts: the limit is the process's, all threads, while the cell only sleeps
    reply, _ = run(kc, "import threading, time\ncpu_stop = threading.Event()\n"
                       "def cpu_spin():\n    while not cpu_stop.is_set(): pass\n"
                       "threading.Thread(target=cpu_spin, daemon=True).start()\ntime.sleep(20)")
    execute(kc, "cpu_stop.set()")
    assert reply["content"].get("ename") == "CellCPUTimeout", reply["content"]
    reply, _ = run(kc, "6*7")
    assert reply["content"]["status"] == "ok"


def test_cpu_limit_from_the_command_line_and_metadata(limited):
    k = limited(extra_arguments=["--cell-cpu=1s"])
    kc = k.kc
    assert k.kernel_info()["pyc"]["limits"]["cell_cpu"] == 1
    # a cell may tighten the kernel's CPU limit ...
    reply, _ = run(kc, busy(), metadata={"pyc": {"cpu": 0.25}})
    assert reply["content"]["ename"] == "CellCPUTimeout"
    assert "limit of 0.25 s" in reply["content"]["evalue"]
    assert reply["metadata"]["pyc"]["cpu_time"] < 0.9
    # ... never lift it
    reply, _ = run(kc, busy(), metadata={"pyc": {"cpu": 100}})
    assert reply["content"]["ename"] == "CellCPUTimeout" and "limit of 1 s" in reply["content"]["evalue"]
    reply, _ = run(kc, "1", metadata={"pyc": {"cpu": "soon"}})
    assert reply["content"]["ename"] == "BadRequest" and "cpu" in reply["content"]["evalue"]


def test_cpu_limit_on_an_isolated_cell_kills_only_the_child(limited):
    k = limited(PYC_CELL_CPU="0.5")
    kc = k.kc
    execute(kc, "iso_cpu = 'before'")
    reply, _ = run(kc, "iso_cpu = 'changed'\n" + busy(), metadata={"pyc": {"isolate": "fork"}})
    assert reply["content"]["ename"] == "CellCPUTimeout", reply["content"]
    assert "its process was killed" in reply["content"]["evalue"]
    md = reply["metadata"]["pyc"]
    assert md["outcome"] == "timeout" and md["limit"] == "cpu" and md["isolated"] == "fork"
    assert md["state"] == "intact"
    assert eval_value(kc, "iso_cpu") == "'before'"


def test_cell_stuck_past_its_cpu_limit_ends_the_kernel(limited):
    k = limited(PYC_CELL_CPU="0.5", PYC_CELL_GRACE="1")
    # A C loop that spends CPU and never checks for signals.
    t = time.monotonic()
    reply, msgs = run(k.kc, "sum(range(10**13))")
    assert time.monotonic() - t < 30
    c = reply["content"]
    assert c["ename"] == "CellCPUTimeout" and "did not stop" in c["evalue"] and "state is lost" in c["evalue"]
    md = reply["metadata"]["pyc"]
    assert md["limit"] == "cpu" and md["state"] == "lost" and md["kernel_ending"] is True
    assert any(m["msg_type"] == "error" for m in msgs)
    assert wait_dead(k, 20) == 3


# ---- output cap ----------------------------------------------------------------------------------------------

def test_a_kernel_started_by_jupyter_has_an_output_cap_and_no_deadline_by_default(limited):
    """Every kernel caps a cell's output at 32 MiB unless told otherwise (the browser's tab keeps every output),
    and keeps no deadline or lifetime (notebook cells may run for hours); PYC_OUTPUT_LIMIT=0 turns the cap off."""
    k = limited()
    limits = k.kernel_info()["pyc"]["limits"]
    assert limits["output_limit"] == 32 << 20, limits
    assert "cell_timeout" not in limits and "lifetime" not in limits, limits
    # 40 MiB printed in 1 MiB lines: 32 MiB reach the client, notice included
    reply, msgs = run(k.kc, "line = 'x' * ((1 << 20) - 1)\nfor i in range(40):\n    print(line)", timeout=120)
    assert reply["content"]["status"] == "ok"
    md = reply["metadata"]["pyc"]
    assert md["output_dropped"] is True and md["output"]["dropped_bytes"] > 0, md
    assert output_bytes(msgs) == 32 << 20
    off = limited(PYC_OUTPUT_LIMIT="0")
    assert "output_limit" not in off.kernel_info()["pyc"]["limits"]


def test_output_cap_bytes(limited):
    k = limited(PYC_OUTPUT_LIMIT="10K")
    reply, msgs = run(k.kc, "for i in range(5000):\n    print('line %05d' % i)\n'done'")
    text = stream_text(msgs)
    assert text.startswith("line 00000\nline 00001\n")
    notices = [m for m in msgs if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"]
    assert len(notices) == 1 and "output limit reached" in notices[0]["content"]["text"]
    assert "(limit: 10240 bytes)" in notices[0]["content"]["text"]
    # the cap holds to the byte, its notice included
    notice = len(notices[0]["content"]["text"].encode())
    assert len(text.encode()) == 10 * 1024 - notice
    assert output_bytes(msgs) == 10 * 1024
    md = reply["metadata"]["pyc"]
    assert md["output_dropped"] is True
    # the rest of the printed text, and the execute_result's whole content
    assert md["output"]["bytes"] == 10240 and md["output"]["dropped_bytes"] > 5000 * 11 - 10240
    assert md["output"]["dropped_messages"] >= 1
    # the execute_result came after the cap: dropped too
    assert not any(m["msg_type"] == "execute_result" for m in msgs)
    assert reply["content"]["status"] == "ok"
    # the next cell starts a new count
    reply, msgs = run(k.kc, "print('fresh')")
    assert stream_text(msgs) == "fresh\n" and reply["metadata"]["pyc"]["output_dropped"] is False


def test_output_cap_messages_per_cell(kc):
    code = "from pyc import display\nfor i in range(50):\n    display(i)"
    reply, msgs = run(kc, code, metadata={"pyc": {"output_messages": 5}})
    shown = [m["content"]["data"]["text/plain"] for m in msgs if m["msg_type"] == "display_data"]
    assert shown == ["0", "1", "2", "3"]           # the fifth message is the notice
    md = reply["metadata"]["pyc"]
    assert md["output"]["messages"] == 5 and md["output"]["dropped_messages"] == 46
    notices = [m for m in msgs if m["msg_type"] == "stream" and "output limit reached" in m["content"]["text"]]
    assert len(notices) == 1
    assert len([m for m in msgs if m["msg_type"] in ("stream", "display_data", "error")]) == 5


def test_output_cap_on_an_isolated_cell(kc):
    code = "for i in range(2000):\n    print(i)"
    reply, msgs = run(kc, code, metadata={"pyc": {"isolate": "fork", "output_limit": 100}})
    assert output_bytes(msgs) == 100
    assert "output limit reached" in stream_text(msgs, "stderr")
    assert reply["metadata"]["pyc"]["output_dropped"] is True


def test_an_isolated_cell_is_not_capped_by_the_spent_session_budget(limited):
    """Once threads have spent the session's budget of output between cells, an isolated cell's displays still
    go out under the cell's own cap (its process used to inherit the spent budget and drop them silently)."""
    k = limited(PYC_OUTPUT_LIMIT="1K")
    reply, _ = run(k.kc, "import threading, time\n"
                         "threading.Thread(target=lambda: (time.sleep(0.3), print('y' * 5000))).start()")
    assert reply["content"]["status"] == "ok"
    time.sleep(1.5)
    reply, msgs = run(k.kc, "from pyc import display\ndisplay({'text/plain': 'shown'}, raw=True)",
                      metadata={"pyc": {"isolate": "fork"}})
    assert reply["content"]["status"] == "ok"
    shown = [m["content"]["data"]["text/plain"] for m in msgs if m["msg_type"] == "display_data"]
    assert shown == ["shown"], [(m["msg_type"], m["content"]) for m in msgs]
    assert reply["metadata"]["pyc"]["output_dropped"] is False


@pytest.mark.parametrize("limit", [100, 1000, 4096])
def test_output_cap_holds_for_every_kind_of_output(limited, limit):
    """Streams, displays, a result and an error in one cell, then a thread and a subprocess that go on
    printing after it: what reaches the client never exceeds the cap, notices included (before, the notice
    came on top of a full cap)."""
    k = limited(PYC_OUTPUT_LIMIT=str(limit))
    code = ("import subprocess, sys, threading, time\n"
            "from pyc import display\n"
            "print('a' * 300)\n"
            "display({'text/plain': 'b' * 300}, raw=True)\n"
            "sys.stderr.write('c' * 300 + '\\n')\n"
            "raise ValueError('d' * 5000)\n")
    reply, msgs = run(k.kc, code)
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "ValueError"
    assert output_bytes(msgs) <= limit, [(m["msg_type"], m["content"]) for m in msgs]
    assert reply["metadata"]["pyc"]["output"]["bytes"] == output_bytes(msgs)
    # after the cell: a thread and a subprocess print 20 KB each, between cells (one budget for the session)
    reply, msgs = run(k.kc, "def talk():\n"
                            "    for _ in range(20):\n"
                            "        print('y' * 1000, flush=True)\n"
                            "        time.sleep(0.01)\n"
                            "threading.Thread(target=talk).start()\n"
                            "subprocess.Popen([sys.executable, '-c', "
                            "'import time\\nfor _ in range(20):\\n    print(\"z\" * 1000, flush=True); time.sleep(0.01)'])")
    assert reply["content"]["status"] == "ok"
    cell = reply["metadata"]["pyc"]["output"]["bytes"]      # the cell's own budget
    assert cell <= limit
    late = []
    end = time.monotonic() + 5
    while time.monotonic() < end:
        try:
            late.append(k.kc.get_iopub_msg(timeout=0.5))
        except Exception:
            continue
    late = [m for m in late if m["msg_type"] == "stream"]
    # what came once the cell's code had ended (some before its idle, the rest after) is the session's budget
    between = output_bytes(msgs) - cell + output_bytes(late)
    assert between <= limit, (output_bytes(msgs), cell, output_bytes(late))
    assert "output between cells" in stream_text(msgs + late, "stderr") or limit < 200


# ---- memory cap ----------------------------------------------------------------------------------------------

@pytest.mark.skipif(UNDER_ASAN, reason="AddressSanitizer reserves terabytes of address space up front")
def test_memory_cap(limited):
    k = limited(PYC_MEMORY_LIMIT="300M")
    kc = k.kc
    reply, _ = run(kc, "small = bytearray(100 * 2**20)\nlen(small)")
    assert reply["content"]["status"] == "ok"
    reply, _ = run(kc, "big = bytes(400 * 2**20)")
    assert reply["content"]["ename"] == "MemoryError"
    md = reply["metadata"]["pyc"]
    assert md["memory_cap_hit"] is True and md["state"] == "intact"
    reply, _ = run(kc, "import numpy as np\narr = np.ones(60 * 2**20)")   # 480 MB of float64
    assert reply["content"]["ename"] == "MemoryError"
    assert reply["metadata"]["pyc"]["memory_cap_hit"] is True
    # the kernel goes on, and the session can still allocate within the cap
    reply, _ = run(kc, "arr = np.ones(2**20)\nfloat(arr.sum())")
    assert reply["content"]["status"] == "ok"
    assert eval_value(kc, "len(small)") == str(100 * 2**20)
    # the guest cannot lift the cap
    reply, _ = run(kc, "import resource\nresource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY,) * 2)")
    assert reply["content"]["status"] == "error"


# ---- open files --------------------------------------------------------------------------------------------

def test_open_file_limit(limited, tmp_path):
    k = limited(PYC_OPEN_FILES="50")
    kc = k.kc
    assert k.kernel_info()["pyc"]["limits"]["open_files"] == 50
    # A cell that opens too many gets EMFILE, and keeps what it opened.  It is the session's first error: the
    # kernel must still be able to format its traceback.
    reply, _ = run(kc, "held = []\nwhile len(held) < 100000: held.append(open('/dev/null'))")
    c = reply["content"]
    assert c["ename"] == "OSError" and "[Errno 24] Too many open files" in c["evalue"], c
    assert reply["metadata"]["pyc"]["state"] == "intact"
    # N of the session's, and the kernel's headroom of 64 more, give or take the few of its own it closed since
    # the limit was set (a client's handshake connection; README, "Limits and outcomes")
    assert 50 <= int(eval_value(kc, "len(held)")) <= 50 + 64 + 16
    # The kernel answers while the files are held (on the connections it has), on shell and on control.
    assert k.kernel_info()["pyc"]["limits"]["open_files"] == 50
    reply, _ = request(kc, "usage_request", {}, channel="control")
    assert reply["content"]["status"] == "ok"
    # Once they are closed, a later cell opens files again.
    execute(kc, "for f in held: f.close()\ndel held")
    reply, _ = run(kc, "more = [open('/dev/null') for _ in range(40)]\nlen(more)")
    assert reply["content"]["status"] == "ok"
    execute(kc, "for f in more: f.close()\ndel more")
    # the guest cannot lift the limit; forked processes (an isolated cell) have the same one
    reply, _ = run(kc, "import resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (10**6, 10**6))")
    assert reply["content"]["status"] == "error"
    limit = eval_value(kc, "resource.getrlimit(resource.RLIMIT_NOFILE)")
    reply, _ = run(kc, "iso_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)",
                   metadata={"pyc": {"isolate": "fork"}})
    assert reply["content"]["status"] == "ok"
    execute(kc, "import subprocess, sys")
    child = eval_value(kc, "subprocess.run([sys.executable, '-c', 'import resource; "
                           "print(resource.getrlimit(resource.RLIMIT_NOFILE))'], capture_output=True, "
                           "text=True).stdout.strip()")
    assert child.strip("'") == limit


def test_open_files_and_cpu_in_usage(limited):
    k = limited(PYC_OPEN_FILES="100", PYC_CELL_CPU="30")
    kc = k.kc
    reply, _ = request(kc, "usage_request", {}, channel="control")
    p = reply["content"]["pyc"]
    assert p["limits"]["open_files"] == 100 and p["limits"]["cell_cpu"] == 30
    assert p["cell_cpu_time"] is None                         # no cell runs
    assert 0 < p["open_files"] < p["open_files_max"]
    assert 100 + 64 < p["open_files_max"] <= 100 + 64 + p["open_files"] + 16
    msg_id = kc.execute(busy(3))
    time.sleep(1)
    reply = get_reply(kc, send(kc, "usage_request", {}, channel="control"), channel="control")
    p = reply["content"]["pyc"]
    assert p["execution_state"] == "busy" and 0.1 < p["cell_cpu_time"] < 3.5
    get_reply(kc, msg_id)
    iopub_for(kc, msg_id)


def test_limits_off_are_not_in_usage(kernel):
    reply, _ = request(kernel.kc, "usage_request", {}, channel="control")
    p = reply["content"]["pyc"]
    assert "cell_cpu" not in p["limits"] and "open_files" not in p["limits"]
    assert isinstance(p["open_files"], int)


# ---- idle timeout, lifetime, shutdown grace ------------------------------------------------------------------

def test_idle_timeout_exits_cleanly_and_publishes_nothing(limited, tmp_path):
    marker = tmp_path / "atexit-ran"
    k = limited(PYC_IDLE_TIMEOUT="2")
    kc = k.kc
    execute(kc, "import atexit\natexit.register(lambda: open(%r, 'w').write('yes'))" % str(marker))
    # requests keep it alive
    for _ in range(3):
        time.sleep(1)
        execute(kc, "1")
    assert k.is_alive()
    # then, idle: nothing on iopub until it ends
    seen = []
    t = time.monotonic()
    while k.process.poll() is None and time.monotonic() - t < 20:
        try:
            seen.append(kc.get_iopub_msg(timeout=0.2))
        except Exception:
            pass
    assert k.process.poll() == 0
    assert 1.5 < time.monotonic() - t < 15
    assert seen == []
    assert marker.read_text() == "yes"
    assert any("idle timeout" in line for line in k.stderr_lines())


def test_lifetime_stops_a_running_cell_then_exits(limited):
    k = limited(PYC_LIFETIME="3")
    kc = k.kc
    reply, _ = run(kc, "import time\ntime.sleep(60)")
    c = reply["content"]
    assert c["ename"] == "KernelLifetimeEnded"
    md = reply["metadata"]["pyc"]
    # the kernel ends after this reply: its state goes with it (README, "Limits and outcomes")
    assert md["limit"] == "lifetime" and md["kernel_ending"] is True and md["state"] == "lost"
    assert wait_dead(k, 15) == 0


def test_lifetime_from_the_command_line(limited):
    k = limited(extra_arguments=["--lifetime=2s"])
    assert k.kernel_info()["pyc"]["limits"]["lifetime"] == 2
    assert wait_dead(k, 15) == 0


def test_shutdown_grace_cuts_a_slow_atexit(limited):
    k = limited(PYC_SHUTDOWN_GRACE="1")
    kc = k.kc
    execute(kc, "import atexit, time\natexit.register(time.sleep, 60)")
    t = time.monotonic()
    request(kc, "shutdown_request", {"restart": False}, channel="control")
    assert wait_dead(k, 20) is not None
    assert time.monotonic() - t < 15
    assert any("shutdown took longer" in line for line in k.stderr_lines())


def test_bad_limit_value_is_refused_at_start(tmp_path):
    p = subprocess.run([PYC_KERNEL, "-f", str(tmp_path / "none.json"), "--cell-timeout=soon"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "cell-timeout" in p.stderr
    env = dict(os.environ, PYC_MEMORY_LIMIT="lots")
    p = subprocess.run([PYC_KERNEL, "-f", str(tmp_path / "none.json")], capture_output=True, text=True,
                       timeout=30, env=env)
    assert p.returncode == 2 and "PYC_MEMORY_LIMIT" in p.stderr
    for arg, env, said in [("--cell-cpu=soon", {}, "cell-cpu"), ("--open-files=1.5", {}, "open-files"),
                           ("--open-files=2G", {}, "open-files"), (None, {"PYC_OPEN_FILES": "lots"}, "PYC_OPEN_FILES"),
                           (None, {"PYC_CELL_CPU": "-1"}, "PYC_CELL_CPU")]:
        p = subprocess.run([PYC_KERNEL, "-f", str(tmp_path / "none.json")] + ([arg] if arg else []),
                           capture_output=True, text=True, timeout=30, env=dict(os.environ, **env))
        assert p.returncode == 2 and said in p.stderr, (arg, env, p.stderr)


# ---- usage_request -------------------------------------------------------------------------------------------

def test_usage_request(kernel):
    kc = kernel.kc
    execute(kc, "usage_blob = bytearray(50 * 2**20)")
    reply, _ = request(kc, "usage_request", {}, channel="control")
    assert reply["msg_type"] == "usage_reply"
    c = reply["content"]
    assert c["pid"] == kernel.pid and c["hostname"]
    assert c["cpu_count"] >= 1 and c["kernel_cpu"] >= 0
    assert 50 * 2**20 < c["kernel_memory"] < 4 * 2**30
    hv = c["host_virtual_memory"]
    assert hv["total"] > hv["available"] > 0 and 0 <= hv["percent"] <= 100
    assert c["pyc"]["rss"] > 50 * 2**20 and c["pyc"]["execution_state"] == "idle"
    assert c["pyc"]["uptime"] > 0 and c["pyc"]["execution_count"] >= 1
    execute(kc, "del usage_blob")


def test_usage_request_answers_while_a_cell_runs(kernel):
    kc = kernel.kc
    # kernel_cpu is the share since the previous usage_request: one now, so that the loop below fills the window
    get_reply(kc, send(kc, "usage_request", {}, channel="control"), channel="control")
    msg_id = kc.execute("import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass")
    time.sleep(0.5)
    reply = get_reply(kc, send(kc, "usage_request", {}, channel="control"), channel="control")
    c = reply["content"]
    assert c["pyc"]["execution_state"] == "busy"
    assert c["kernel_cpu"] > 20          # busy looping since the previous request
    get_reply(kc, msg_id)
    iopub_for(kc, msg_id)


# ---- checkpoints ---------------------------------------------------------------------------------------------

def test_checkpoint_and_replay(limited, tmp_path):
    cdir = tmp_path / "ckpt"
    k = limited(PYC_CHECKPOINT_DIR=str(cdir))
    kc = k.kc
    path = k.kernel_info()["pyc"]["checkpoint"]
    assert path.startswith(str(cdir))
    execute(kc, "import math\nck_a = 2")
    execute(kc, "ck_b = ck_a * 21  # %% not a cell marker\n# %% nor this")
    execute(kc, "ck_a / 0")                                 # an error: not checkpointed
    execute(kc, "ck_c = 'x'", silent=True)                  # silent: not checkpointed
    execute(kc, "def ck_f(x):\n    return x + ck_b\n")
    execute(kc, "ck_d = !echo hi")                            # IPython-style line, kept as typed
    text = open(path).read()
    assert text.startswith("# pyc checkpoint 1 ")
    assert "secrets" in text
    assert "ck_a / 0" not in text and "ck_c" not in text
    assert text.count("# %% pyc ") == 4
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"

    k2 = limited(PYC_REPLAY=path, PYC_CHECKPOINT_DIR=str(cdir))
    info = k2.kernel_info()["pyc"]
    assert info["replayed"]["cells"] == 4 and info["replayed"]["ran"] == 4 and info["replayed"]["error"] is None
    assert eval_value(k2.kc, "ck_a, ck_b, ck_f(1), ck_d, 'ck_c' in globals()") == "(2, 42, 43, ['hi'], False)"
    # the new session's checkpoint starts with the replayed cells
    assert open(info["checkpoint"]).read().count("# %% pyc ") == 4


def test_isolated_cells_replay_and_a_restart_gets_a_new_file(limited, tmp_path):
    cdir = tmp_path / "ckpt"
    k = limited(PYC_CHECKPOINT_DIR=str(cdir))
    first = k.kernel_info()["pyc"]["checkpoint"]
    execute(k.kc, "%%isolate 30\niso_ck = 5")
    reply, _ = run(k.kc, "iso_ck2 = iso_ck + 1", metadata={"pyc": {"isolate": "fork"}})
    assert reply["content"]["status"] == "ok"
    text = open(first).read()
    assert "%%isolate" not in text and "iso_ck = 5" in text
    k.restart()
    second = k.kernel_info()["pyc"]["checkpoint"]
    assert second != first and second.endswith("-2.py")
    execute(k.kc, "after_restart = 1")
    assert "after_restart" not in open(first).read()
    k2 = limited(PYC_REPLAY=first, PYC_CHECKPOINT="0")
    assert k2.kernel_info()["pyc"]["replayed"]["ran"] == 2
    assert eval_value(k2.kc, "iso_ck, iso_ck2") == "(5, 6)"


def test_replay_stops_at_a_failing_cell(limited, tmp_path):
    f = tmp_path / "bad.py"
    f.write_text("# pyc checkpoint 1 0123456789abcdef\n\n# %% pyc 0123456789abcdef In[1] x\nrp = 1\n"
                 "\n# %% pyc 0123456789abcdef In[2] x\nraise ValueError('no')\n"
                 "\n# %% pyc 0123456789abcdef In[3] x\nrp = 3\n")
    k = limited(extra_arguments=["--replay", str(f), "--no-checkpoint"])
    info = k.kernel_info()["pyc"]
    assert info["checkpoint"] is None
    assert info["replayed"]["ran"] == 1 and info["replayed"]["error"]["ename"] == "ValueError"
    assert eval_value(k.kc, "rp") == "1"


def test_checkpoint_off(limited, tmp_path):
    k = limited(PYC_CHECKPOINT="0", PYC_CHECKPOINT_DIR=str(tmp_path / "none"))
    execute(k.kc, "x = 1")
    assert k.kernel_info()["pyc"]["checkpoint"] is None
    assert not (tmp_path / "none").exists()


def test_sandboxed_kernelspec_sets_limits_through_env():
    """The README's agent-host kernelspec: made by `pyc-kernel install --env`, its limits reach the kernel."""
    p = subprocess.run([PYC_KERNEL, "install", "--user", "--name", "pyc-sandboxed", "--display-name",
                        "Python 3 (pyc, sandboxed)", "--env", "PYC_CELL_TIMEOUT=60", "--env", "PYC_OUTPUT_LIMIT=1M",
                        "--env", "PYC_IDLE_TIMEOUT=15m"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    k = Kernel("pyc-sandboxed")
    try:
        limits = k.kernel_info()["pyc"]["limits"]
        assert limits["cell_timeout"] == 60 and limits["output_limit"] == 2**20 and limits["idle_timeout"] == 900
        assert "memory_limit" not in limits
    finally:
        k.shutdown(now=True)
