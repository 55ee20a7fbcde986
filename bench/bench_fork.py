#!/usr/bin/env python3
"""Session fork benchmark (a benchmark, not a test): a pyc kernel holding 1 GiB of NumPy data is forked,
one child at a time, and the time from the fork request to the child's first kernel_info_reply is taken;
the child's own memory (USS: private pages) is read right after, and again after it writes the array.

    /usr/bin/python3 bench/bench_fork.py [--pyc build/pyc-kernel] [--runs 5] [--gib 1]

Target (issue 4): <= 30 ms until the child answers.  Every process it starts is ended by pid.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import tempfile
import time
import uuid


def uss_mb(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        return sum(int(l.split()[1]) for l in f if l.startswith(("Private_Clean:", "Private_Dirty:"))) / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--pyc", default=os.path.join(here, "..", "build", "pyc-kernel"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--gib", type=float, default=1.0)
    args = ap.parse_args()

    import zmq
    from jupyter_client.manager import KernelManager
    from jupyter_client.session import Session

    tmp = tempfile.mkdtemp(prefix="pyc-bench-fork-")
    os.makedirs(os.path.join(tmp, "kernels", "pyc"))
    with open(os.path.join(tmp, "kernels", "pyc", "kernel.json"), "w") as f:
        json.dump({"argv": [os.path.abspath(args.pyc), "-f", "{connection_file}"], "display_name": "pyc",
                   "language": "python"}, f)
    for var in ("JUPYTER_PATH", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
        os.environ[var] = tmp
    km = KernelManager(kernel_name="pyc")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    pids = []
    try:
        kc.wait_for_ready(timeout=60)
        n = int(args.gib * (1 << 30) / 8)
        kc.execute_interactive("import numpy as np\nbig = np.ones(%d)" % n, timeout=300)
        ctx = zmq.Context.instance()
        times, uss0, uss1 = [], [], []
        for _ in range(args.runs):
            cid = uuid.uuid4().hex
            t0 = time.perf_counter()
            kc.shell_channel.send(kc.session.msg("comm_open", {"comm_id": cid, "target_name": "pyc.fork",
                                                               "data": {"n": 1}}))
            while True:
                m = kc.get_iopub_msg(timeout=60)
                if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == cid:
                    break
            child = m["content"]["data"]["children"][0]
            pids.append(child["pid"])
            info = child["connection"]
            sock = ctx.socket(zmq.DEALER)
            sock.connect("tcp://%s:%d" % (info["ip"], info["shell_port"]))
            s = Session(key=info["key"].encode())
            s.send(sock, "kernel_info_request", {})
            sock.recv_multipart()
            times.append((time.perf_counter() - t0) * 1000)
            uss0.append(uss_mb(child["pid"]))
            s.send(sock, "execute_request", {"code": "big[:] = 2.0", "silent": True})
            sock.recv_multipart()
            uss1.append(uss_mb(child["pid"]))
            sock.close(0)
            os.kill(child["pid"], signal.SIGKILL)
        print("session holding %.1f GiB, %d forks" % (args.gib, args.runs))
        print("fork to first kernel_info_reply: median %.1f ms (min %.1f, max %.1f)  target <= 30 ms: %s"
              % (statistics.median(times), min(times), max(times), "met" if statistics.median(times) <= 30 else "NOT met"))
        print("child's own memory (USS): %.1f MB at start, %.0f MB after writing the array"
              % (statistics.median(uss0), statistics.median(uss1)))
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
