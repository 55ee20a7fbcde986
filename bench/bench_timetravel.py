#!/usr/bin/env python3
"""Time travel benchmark (issue 15; a benchmark, not a test): snapshots and restores of a pyc session beside
the same restore done the serialization way, in one run.

For sessions holding 10 MB, 1 GiB and 4 GiB of NumPy data (written, so that every page is real):
  - take: the pyc.snapshot take request to its answer (the session is forked and parked);
  - restore: pyc_client.restore from the request to the first answer of the restored kernel on shell (the
    kernel changes process; the client's channels are made anew), then one kernel_info round trip;
  - pickle: what a serializing checkpointer (Kishu and the like) pays as a floor, timed inside the kernel:
    pickle.dumps of the data (protocol 5, in memory) at checkpoint time, pickle.loads at restore time.
Then the memory that 5 automatic snapshots (PYC_SNAPSHOTS=5) really hold -- their own pages, USS -- over 5
cells of a notebook that rewrites a 1 GiB array in place, beside one that appends 200 MB a cell.

    /usr/bin/python3 bench/bench_timetravel.py [--pyc build/pyc-kernel] [--sizes 10M,1G,4G] [--runs 5]

Goal: restore of a 1 GiB session in at most 50 ms.  Every process it starts is ended by pid.
"""

import argparse
import ast
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def label(n):
    return "%.0f MB" % (n / 1e6) if n < (1 << 30) else "%.0f GiB" % (n / (1 << 30))


class Session:
    """A pyc kernel started by jupyter_client from a kernelspec in a temporary Jupyter path."""

    def __init__(self, argv, env=None):
        from jupyter_client.manager import KernelManager

        self.km = KernelManager(kernel_name="pyc")
        self.km.start_kernel(env=dict(os.environ, **(env or {})), stderr=subprocess.DEVNULL)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.pids = {self.km.provisioner.process.pid}

    def run(self, code, timeout=600):
        reply = self.kc.execute_interactive(code, timeout=timeout, output_hook=lambda m: None)
        if reply["content"]["status"] != "ok":
            raise SystemExit("cell failed: %s: %s" % (reply["content"].get("ename"), reply["content"].get("evalue")))
        return reply

    def value(self, expr):
        reply = self.kc.execute_interactive("", user_expressions={"v": expr}, store_history=False,
                                            output_hook=lambda m: None, timeout=600)
        return reply["content"]["user_expressions"]["v"]["data"]["text/plain"]

    def close(self):
        try:
            self.kc.stop_channels()
            self.km.shutdown_kernel(now=True)
        except Exception:
            pass
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def size_row(pyc_client, size, runs):
    s = Session(None)
    try:
        s.run("import numpy as np, pickle, time\ndata = np.ones(%d // 8)" % size)
        take, restore, first, dumps, loads = [], [], [], [], []
        for i in range(runs):
            t0 = time.perf_counter()
            rec = pyc_client.snapshot(s.kc, "s%d" % i)
            take.append((time.perf_counter() - t0) * 1000)
            s.pids.add(rec["pid"])
            s.run("data[:1000] = %d" % (i + 2))                  # the session moves on
            t0 = time.perf_counter()
            answer = pyc_client.restore(s.kc, "s%d" % i)
            restore.append((time.perf_counter() - t0) * 1000)
            s.pids.add(answer["pid"])
            t1 = time.perf_counter()
            s.kc.kernel_info(reply=True, timeout=30)
            first.append((time.perf_counter() - t1) * 1000)
            assert s.value("float(data[0])") == "1.0"
            for snap in pyc_client.snapshots(s.kc):
                s.pids.add(snap["pid"])
            pyc_client.drop_snapshot(s.kc, "s%d" % i)
        # the serialization way, in the kernel itself (no transfer: a floor)
        s.run("_d, _l = [], []\n"
              "for _ in range(%d):\n"
              "    _t = time.perf_counter(); _b = pickle.dumps(data, protocol=5); _d.append(time.perf_counter() - _t)\n"
              "    _t = time.perf_counter(); _x = pickle.loads(_b); _l.append(time.perf_counter() - _t)\n"
              "    del _b, _x" % max(1, min(runs, 3)))
        dumps = ast.literal_eval(s.value("_d"))
        loads = ast.literal_eval(s.value("_l"))
        return {"take": median(take), "restore": median(restore), "restore_min": min(restore),
                "restore_max": max(restore), "kernel_info": median(first), "dumps": median(dumps) * 1000,
                "loads": median(loads) * 1000}
    finally:
        s.close()


def automatic_row(pyc_client, gib, mode):
    s = Session(None, env={"PYC_SNAPSHOTS": "5"})
    try:
        n = int(gib * (1 << 30)) // 8
        if mode == "rewrite":
            s.run("import numpy as np\ndata = np.ones(%d)" % n)
            for i in range(5):
                s.run("data[:] = %d" % (i + 2))
        else:
            s.run("import numpy as np\nparts = [np.ones(%d)]" % (200 << 20 >> 3))
            for i in range(5):
                s.run("parts.append(np.full(%d, %d.0))" % (200 << 20 >> 3, i + 2))
        snaps = pyc_client.snapshots(s.kc)
        for snap in snaps:
            s.pids.add(snap["pid"])
        with open("/proc/%d/smaps_rollup" % s.km.provisioner.process.pid) as f:
            rss = sum(int(l.split()[1]) for l in f if l.startswith("Rss:")) * 1024
        return {"count": len(snaps), "held": sum(x["bytes"] or 0 for x in snaps), "kernel_rss": rss}
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--pyc", default=os.path.join(here, "..", "build", "pyc-kernel"))
    ap.add_argument("--sizes", default="10M,1G,4G")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--auto-gib", type=float, default=1.0)
    args = ap.parse_args()

    sys.path.insert(0, os.path.join(here, "..", "cli", "python"))
    sys.path.insert(0, here)
    import pyc_client
    from bench_fork import temp_kernelspec

    tmp = temp_kernelspec(args.pyc, "pyc-bench-tt-")
    os.environ["PYC_CHECKPOINT"] = "0"
    try:
        print("%-8s %10s %14s %22s %12s %14s %14s %9s" % ("session", "take ms", "restore ms", "(min-max)",
                                                          "then k_info", "pickle.dumps", "pickle.loads",
                                                          "loads/rst"))
        for size in [parse_size(x) for x in args.sizes.split(",") if x.strip()]:
            r = size_row(pyc_client, size, args.runs)
            print("%-8s %10.1f %14.1f %22s %12.2f %14.1f %14.1f %8.1fx"
                  % (label(size), r["take"], r["restore"], "(%.1f-%.1f)" % (r["restore_min"], r["restore_max"]),
                     r["kernel_info"], r["dumps"], r["loads"], r["loads"] / r["restore"]), flush=True)
        print("goal: restore of a 1 GiB session in <= 50 ms (request to the restored kernel's first answer)")
        print()
        print("5 automatic snapshots (PYC_SNAPSHOTS=5), what they hold of their own after 5 cells:")
        for mode, what in (("rewrite", "rewrites a %.0f GiB array in place each cell" % args.auto_gib),
                           ("append", "appends a 200 MB array each cell")):
            r = automatic_row(pyc_client, args.auto_gib, mode)
            print("  a notebook that %-40s %d snapshots hold %7.0f MB; the kernel's RSS %7.0f MB"
                  % (what + ":", r["count"], r["held"] / 1e6, r["kernel_rss"] / 1e6), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
