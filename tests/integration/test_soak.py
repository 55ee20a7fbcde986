"""The soak test of issue 14 (make check-slow): the kernel under the faults that once stalled, crashed or grew
it, all at once and for a while -- two kernels on one history file, hundreds of user forks and pools with
output, pyc.fork while usage_request polls, keyless floods on every socket -- bounded in count and time,
with the kernel's memory sampled before and after.
"""

import os
import subprocess
import sys
import threading
import time

import pytest
import zmq

import pyctest
from pyctest import execute, pyc_only, rss_mb, stream_text

pytestmark = [pytest.mark.slow, pyc_only]


def flood(info, stop, counts):
    """Keyless junk on every channel until stop: signed with the wrong key, unsigned, oversized, and
    heartbeat pings nobody reads."""
    ctx = zmq.Context()
    socks = {}
    try:
        for chan in ("shell", "control", "stdin", "hb"):
            s = ctx.socket(zmq.DEALER)
            s.linger = 0
            s.setsockopt(zmq.SNDHWM, 1000)
            s.setsockopt(zmq.SNDTIMEO, 100)
            s.connect("tcp://127.0.0.1:%d" % info[chan + "_port"])
            socks[chan] = s
        sub = ctx.socket(zmq.SUB)                  # a subscriber that never reads
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.setsockopt(zmq.RCVHWM, 10)
        sub.connect("tcp://127.0.0.1:%d" % info["iopub_port"])
        junk = [b"<IDS|MSG>", b"f" * 64, b'{"msg_id":"x","msg_type":"execute_request","session":"s"}', b"{}",
                b"{}", b'{"code":"import os; os._exit(1)"}']
        while not stop.is_set():
            for chan, s in socks.items():
                try:
                    s.send_multipart([b"ping" * 4] if chan == "hb" else junk)
                    counts[chan] = counts.get(chan, 0) + 1
                except zmq.Again:
                    pass
    finally:
        ctx.destroy(linger=0)


def test_soak(tmp_path):
    shared = {"PYC_HISTORY_FILE": str(tmp_path / "history.sqlite")}
    a = pyctest.Kernel("pyc", env=shared)
    b = pyctest.Kernel("pyc", env=shared)
    stop = threading.Event()
    counts = {}
    floods = [threading.Thread(target=flood, args=(k.km.get_connection_info(), stop, counts), daemon=True)
              for k in (a, b)]
    try:
        execute(a.kc, "x = 1")
        execute(b.kc, "import numpy")
        before = rss_mb(a.pid), rss_mb(b.pid)
        for t in floods:
            t.start()
        deadline = time.monotonic() + 60
        rounds = 0
        while time.monotonic() < deadline and rounds < 8:
            rounds += 1
            long_id = a.kc.execute("import time; time.sleep(2)")
            # 25 user forks with output and a pool, in the other kernel, while the first holds a cell
            reply, msgs = execute(b.kc, "import os\nfor i in range(25):\n    pid = os.fork()\n"
                                        "    if pid == 0:\n        print('child', i, flush=True)\n"
                                        "        os._exit(0)\n    os.waitpid(pid, 0)\n"
                                        "import multiprocessing as mp\n"
                                        "with mp.get_context('fork').Pool(2) as p:\n"
                                        "    print(sum(p.map(abs, range(-50, 50))))", timeout=60)
            assert reply["content"]["status"] == "ok", reply["content"]
            out = stream_text(msgs)
            assert out.count("child") == 25 and "2500\n" in out, out
            assert pyctest.get_reply(a.kc, long_id, timeout=30)["content"]["status"] == "ok"
            pyctest.iopub_for(a.kc, long_id)
        stop.set()
        for t in floods:
            t.join(timeout=10)
        assert rounds >= 3 and counts.get("hb", 0) > 1000, (rounds, counts)
        for k in (a, b):
            pyctest.assert_alive(k.kc)
        reply, _ = pyctest.request(b.kc, "history_request", {"hist_access_type": "range", "session": 0,
                                                             "output": False, "raw": True})
        assert len(reply["content"]["history"]) == rounds + 2
        after = rss_mb(a.pid), rss_mb(b.pid)
        for was, now in zip(before, after):
            assert now - was < 100, (before, after)
    finally:
        stop.set()
        a.shutdown()
        b.shutdown()


def test_fork_under_polling_soak(fresh_kernel):
    """pyc.fork 40 times while a poller asks usage_request without pause: every child answers."""
    sys.path.insert(0, os.path.join(pyctest.PYC_SRCDIR, "cli", "python"))
    import pyc_client

    poll_code = ("import sys\nfrom jupyter_client import BlockingKernelClient\nkc = BlockingKernelClient()\n"
                 "kc.load_connection_file(sys.argv[1])\nkc.start_channels()\nimport os\n"
                 "while not os.path.exists(sys.argv[2]):\n"
                 "    kc.control_channel.send(kc.session.msg('usage_request', {}))\n"
                 "    kc.get_control_msg(timeout=10)\n")
    stopfile = os.path.join(pyctest.env_root(), "stop-polling")
    poller = subprocess.Popen([pyctest.PYC_PYTHON, "-c", poll_code, fresh_kernel.km.connection_file, stopfile],
                              env=pyctest.child_env())
    pyctest.register_pid(poller.pid)
    try:
        for _ in range(20):
            kids = pyc_client.fork(fresh_kernel.kc, 2)
            try:
                for c in kids:
                    pyctest.register_pid(c.pyc_child["pid"])
                    reply, _ = pyctest.request(c, "usage_request", {}, channel="control", timeout=10)
                    assert reply["content"]["status"] == "ok"
            finally:
                for c in kids:
                    c.stop_channels()
                    pyctest.kill_pid(c.pyc_child["pid"])
    finally:
        open(stopfile, "w").close()
        poller.wait(timeout=30)
        pyctest.kill_pid(poller.pid)
