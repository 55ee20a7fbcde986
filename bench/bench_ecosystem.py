#!/usr/bin/env python3
"""What the notebook ecosystem (issue 10) costs pyc, beside ipykernel (a benchmark, not a test).

    /usr/bin/python3 bench/bench_ecosystem.py [--pyc build/pyc-kernel] [--runs 200]

Rows, each for pyc and ipykernel started the same way (jupyter_client, Jupyter's and IPython's directories
in a temporary directory):
  * start: spawn to the first kernel_info_reply (median of 5);
  * RSS after start (one `pass` cell), and after the first get_ipython();
  * `pass` round trip (request to reply and idle; median and p99 of --runs), before IPython is imported and
    after, with asyncio's loop made, and with %autoreload 2 on (each cell then checks every module);
  * the first get_ipython() cell: for pyc the one-time import of IPython and the making of its shell, for
    ipykernel a cell like any other (it paid for IPython at start).
Every kernel is ended by pid at the end.
"""

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpec


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def rss_mb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class Kernel:
    def __init__(self, argv, cwd):
        self.km = KernelManager()
        self.km._kernel_spec = KernelSpec(argv=argv, language="python", display_name="bench", env={})
        t0 = time.perf_counter()
        self.km.start_kernel(cwd=cwd)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.start_ms = (time.perf_counter() - t0) * 1000
        self.pid = self.km.provisioner.process.pid

    def run(self, code, timeout=120):
        """Request to reply and idle, in ms."""
        t0 = time.perf_counter()
        msg_id = self.kc.execute(code)
        idle = reply = False
        while not (idle and reply):
            if not reply:
                r = self.kc.get_shell_msg(timeout=timeout)
                reply = r["parent_header"].get("msg_id") == msg_id
                if reply and r["content"]["status"] != "ok":
                    raise RuntimeError("%r failed: %s" % (code, r["content"].get("evalue")))
            while not idle:
                m = self.kc.get_iopub_msg(timeout=timeout)
                idle = (m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status"
                        and m["content"]["execution_state"] == "idle")
        return (time.perf_counter() - t0) * 1000

    def round_trips(self, runs):
        for _ in range(20):
            self.run("pass")
        return [self.run("pass") for _ in range(runs)]

    def close(self):
        try:
            self.kc.stop_channels()
            self.km.shutdown_kernel(now=True)
        finally:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass


def measure(argv, runs, cwd):
    row = {}
    starts = []
    for _ in range(4):
        k = Kernel(argv, cwd)
        starts.append(k.start_ms)
        k.close()
    k = Kernel(argv, cwd)
    try:
        starts.append(k.start_ms)
        row["start"] = statistics.median(starts)
        k.run("pass")
        row["rss"] = rss_mb(k.pid)
        rt = k.round_trips(runs)
        row["pass"] = (statistics.median(rt), percentile(rt, 0.99))
        row["first get_ipython()"] = k.run("get_ipython()")
        row["rss ipython"] = rss_mb(k.pid)
        rt = k.round_trips(runs)
        row["pass ipython"] = (statistics.median(rt), percentile(rt, 0.99))
        k.run("import asyncio")
        rt = k.round_trips(runs)
        row["pass asyncio"] = (statistics.median(rt), percentile(rt, 0.99))
        k.run("%load_ext autoreload")
        k.run("%autoreload 2")
        rt = k.round_trips(runs)
        row["pass autoreload"] = (statistics.median(rt), percentile(rt, 0.99))
    finally:
        k.close()
    return row


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pyc", default=os.path.join(here, "..", "build", "pyc-kernel"))
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pyc-bench-eco-")
    os.environ.update(JUPYTER_RUNTIME_DIR=tmp, JUPYTER_DATA_DIR=tmp, IPYTHONDIR=os.path.join(tmp, "ipython"),
                      JUPYTER_CONFIG_DIR=os.path.join(tmp, "config"), PYC_HISTORY_FILE=":memory:",
                      PYDEVD_DISABLE_FILE_VALIDATION="1")
    try:
        pyc = measure([os.path.abspath(args.pyc), "-f", "{connection_file}"], args.runs, tmp)
        ipy = measure([sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f",
                       "{connection_file}"], args.runs, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print("%-34s %12s %12s %9s" % ("", "pyc", "ipykernel", "pyc/ipyk"))
    print("-" * 70)

    def line(name, a, b, fmt="%.2f"):
        print("%-34s %12s %12s %8.2fx" % (name, fmt % a, fmt % b, a / b if b else float("nan")))

    line("start (ms, median of 5)", pyc["start"], ipy["start"], "%.1f")
    line("RSS after start (MB)", pyc["rss"], ipy["rss"], "%.1f")
    line("first get_ipython() cell (ms)", pyc["first get_ipython()"], ipy["first get_ipython()"], "%.1f")
    line("RSS with IPython's shell (MB)", pyc["rss ipython"], ipy["rss ipython"], "%.1f")
    for key, name in (("pass", "before IPython"), ("pass ipython", "with IPython's shell"),
                      ("pass asyncio", "with asyncio's loop"), ("pass autoreload", "with %autoreload 2")):
        line("pass p50 %s (ms)" % name, pyc[key][0], ipy[key][0], "%.3f")
        line("pass p99 %s (ms)" % name, pyc[key][1], ipy[key][1], "%.3f")
    print("(pyc's first get_ipython() imports IPython and makes its shell, once; ipykernel did that at start:"
          " compare it with ipykernel's start)")


if __name__ == "__main__":
    main()
