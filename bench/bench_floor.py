#!/usr/bin/python3
"""bench_floor.py -- pyc-kernel beside floor-py and ipykernel: issue 22's "performance at the floor".

    /usr/bin/python3 bench/bench_floor.py [--quick] [--pyc PATH] [--floor PATH] [--no-ipykernel] [--json FILE]

floor-py (bench/floor_py.c, built by `make floor-py` in the build directory) is a single-threaded C kernel on
pyc's own libraries that does only the Jupyter work of a request and runs the cell with CPython: the floor
pyc is judged against.  All three kernels run in one run, interleaved (the order rotates every round), each
measurement on fresh kernels started by jupyter_client from kernelspecs written into a temporary Jupyter
data directory (Jupyter's and IPython's directories all point there), and every kernel is ended by its pid
(shutdown_request, then SIGKILL), also on an error, Ctrl-C or SIGTERM.

For each kernel, per round (median over --rounds fresh kernels):
  1) RSS after start: Rss of /proc/PID/smaps_rollup right after the first kernel_info_reply;
  2) CPU per request, pipelined: --pipelined `pass` requests sent at once, then every reply and idle status
     collected; the kernel's CPU is the sum of the first field of /proc/PID/task/*/schedstat over all its
     threads, before and after, divided by the count;
  3) the same one at a time (--seq requests, each waited for to its reply and idle), which also gives the
     round trip p50 and p99;
  4) context switches (voluntary + nonvoluntary of /proc/PID/task/*/status) and wakeups (voluntary switches:
     a thread that went to sleep was woken once) per request, in both modes.
Then, once, on one fresh kernel each, all three alive together:
  5) idle wakeups: context switches of all threads during --idle seconds with no client traffic (the
     client sends no heartbeats);
  6) RSS after --cells distinct cells `x = i` (in pipelined batches of 50, each collected before the next,
     so no unread backlog inflates it; RSS read after every batch) and its growth in bytes per cell: the
     least-squares slope over the last 80% of the batches (the first fifth holds the one-time steps, about
     0.5 MB of allocator arenas and libzmq buffers even in floor-py; single batches jump by up to 1 MB).

Goals (issue 22): CPU per request at most 1.4x floor-py in both modes, round trip p50 at most 1.25x
floor-py, 0 idle wakeups, RSS at most 15 MB after start and flat over cells (at most 50 B a cell, 0.5 MB
over 10,000 cells; floor-py itself measures 10-50: allocator steps).
The client is the lean pyzmq one of bench.py (pre-signed requests, replies not verified).  On a small shared
machine the numbers are noisy: compare the ratios of one run, not absolute figures across runs.
"""
import argparse
import atexit
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import zmq
from jupyter_client import KernelManager
from jupyter_client.session import Session

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from bench import NOBLOCK, BenchError, quantile, recv_frames, send_frames  # noqa: E402

FULL = dict(rounds=3, pipelined=2000, seq=1000, cells=10000, idle=20.0)
QUICK = dict(rounds=2, pipelined=500, seq=300, cells=2000, idle=5.0)
BATCH = 50                      # cells per pipelined batch in the RSS-over-cells run
FLAT_B = 50                     # "flat over cells": at most this many bytes a cell (0.5 MB over 10,000 cells)
NAMES = ("pyc", "floor-py", "ipykernel")
LIVE = {}                       # pid -> Popen of every kernel not yet known to be dead
SPAWNING = []                   # non-empty while a kernel is spawned and not yet in LIVE
PENDING = []                    # SIGINT/SIGTERM that came then, raised once the kernel is in LIVE


def kill_all():
    """Kills every kernel still registered, by its pid.  Safe to call more than once."""
    for pid, proc in list(LIVE.items()):
        if proc.poll() is None:
            try:
                os.kill(pid, signal.SIGKILL)
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        LIVE.pop(pid, None)


def on_signal(signum, frame):
    if SPAWNING:
        PENDING.append(signum)
        return
    raise SystemExit(128 + signum)


# ---- /proc ---------------------------------------------------------------------------------------------------

def snapshot(pid):
    """Sums over the threads of pid: CPU ns, voluntary and nonvoluntary switches; and per-thread switches."""
    cpu = vol = invol = 0
    per = {}
    base = "/proc/%d/task" % pid
    for tid in os.listdir(base):
        try:
            with open("%s/%s/schedstat" % (base, tid)) as f:
                c = int(f.read().split()[0])
            v = n = 0
            with open("%s/%s/status" % (base, tid)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        v = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        n = int(line.split()[1])
            with open("%s/%s/comm" % (base, tid)) as f:
                comm = f.read().strip()
        except (OSError, ValueError, IndexError):
            continue        # the thread ended while we read it
        cpu, vol, invol = cpu + c, vol + v, invol + n
        per[tid] = (comm, v + n)
    return {"cpu_ns": cpu, "vol": vol, "invol": invol, "threads": per}


def rss_mb(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Rss:"):
                return int(line.split()[1]) / 1024.0
    raise BenchError("no Rss in /proc/%d/smaps_rollup" % pid)


# ---- one kernel, started by jupyter_client, and a lean client ----------------------------------------------

class Kernel:
    def __init__(self, name, timeout=60.0):
        self.name = name
        self.km = KernelManager(kernel_name="bench-" + name)
        SPAWNING.append(name)       # a signal between the spawn and LIVE would leave the kernel running
        try:
            self.km.start_kernel()
            self.proc = self.km.provisioner.process
            self.pid = self.proc.pid
            LIVE[self.pid] = self.proc
        finally:
            SPAWNING.clear()
            if PENDING:
                raise SystemExit(128 + PENDING[0])
        info = self.km.get_connection_info()
        key = info["key"].encode() if isinstance(info["key"], str) else info["key"]
        self.session = Session(key=key, signature_scheme=info["signature_scheme"], username="bench")
        self.ctx = zmq.Context.instance()
        self.socks = []
        url = "%s://%s:%%d" % (info["transport"], info["ip"])
        self.shell = self._sock(zmq.DEALER, url % info["shell_port"])
        self.control = self._sock(zmq.DEALER, url % info["control_port"])
        self.iopub = self._sock(zmq.SUB, url % info["iopub_port"])
        self.iopub.setsockopt(zmq.SUBSCRIBE, b"")
        self.poller = zmq.Poller()
        self.poller.register(self.shell, zmq.POLLIN)
        self.poller.register(self.iopub, zmq.POLLIN)
        # 1) RSS right after the first kernel_info_reply.
        msg_id = self.send("kernel_info_request", {})
        deadline = time.monotonic() + timeout
        while True:
            if self.shell.poll(5, zmq.POLLIN):
                if msg_id.encode() in self.split(recv_frames(self.shell))[1]:
                    break
            self.check_alive()
            if time.monotonic() > deadline:
                raise BenchError("%s: no kernel_info_reply within %.0f s" % (name, timeout))
        self.rss_start = rss_mb(self.pid)
        self.wait_iopub()

    def _sock(self, kind, url):
        s = self.ctx.socket(kind)
        for opt, val in ((zmq.LINGER, 0), (zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.RECONNECT_IVL, 1),
                         (zmq.RECONNECT_IVL_MAX, 1)):
            s.setsockopt(opt, val)
        s.connect(url)
        self.socks.append(s)
        return s

    # The request building and framing of bench.py's client, which speaks the same raw ZeroMQ.
    build = bench.Kernel.build
    build_execute = bench.Kernel.build_execute
    send = bench.Kernel.send
    split = staticmethod(bench.Kernel.split)

    def check_alive(self):
        if self.proc.poll() is not None:
            raise BenchError("%s exited with status %s" % (self.name, self.proc.returncode))

    def wait_iopub(self, timeout=20.0):
        """Resends kernel_info until a status message shows that the iopub subscription is live."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.send("kernel_info_request", {})
            end = time.monotonic() + 0.2
            while time.monotonic() < end:
                if self.iopub.poll(20, zmq.POLLIN) and b'"status"' in self.split(recv_frames(self.iopub))[0]:
                    self.drain(0.1)
                    return
                self.check_alive()
        raise BenchError("%s: iopub gave no status message within %.0f s" % (self.name, timeout))

    def drain(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for sock, _ in self.poller.poll(10):
                recv_frames(sock)

    def pipelined(self, codes, timeout=300.0):
        """Sends one request per code at once, collects every reply and idle; returns seconds."""
        msgs = [self.build_execute(c)[1] for c in codes]
        n, replies, idles = len(msgs), 0, 0
        t0 = time.perf_counter()
        for frames in msgs:
            send_frames(self.shell, frames)
        deadline = time.monotonic() + timeout
        while replies < n or idles < n:
            events = self.poller.poll(1000)
            if not events:
                self.check_alive()
                if time.monotonic() > deadline:
                    raise BenchError("%s: %d of %d replies, %d idles after %.0f s" % (self.name, replies, n, idles,
                                                                                      timeout))
            for sock, _ in events:
                while True:
                    try:
                        h, p, c = self.split(recv_frames(sock, NOBLOCK))
                    except zmq.Again:
                        break
                    if sock is self.shell:
                        if b'"execute_reply"' in h:
                            if b'"ok"' not in c:
                                raise BenchError("%s: execute_reply not ok: %s" % (self.name, c[:200]))
                            replies += 1
                    elif b'"status"' in h and b'"idle"' in c:
                        idles += 1
        return time.perf_counter() - t0

    def one_at_a_time(self, n):
        """n `pass` requests, each to its reply and idle; returns the round trips in ms."""
        msgs = [self.build_execute("pass") for _ in range(n)]
        out = []
        for msg_id, frames in msgs:
            mid = b'"' + msg_id.encode() + b'"'
            got_reply = got_idle = False
            t0 = time.perf_counter_ns()
            send_frames(self.shell, frames)
            while not (got_reply and got_idle):
                events = self.poller.poll(10000)
                if not events:
                    self.check_alive()
                    raise BenchError("%s: no reply and idle within 10 s" % self.name)
                for sock, _ in events:
                    while True:
                        try:
                            h, p, c = self.split(recv_frames(sock, NOBLOCK))
                        except zmq.Again:
                            break
                        if mid not in p:
                            continue
                        if sock is self.shell:
                            got_reply = True
                        elif b'"status"' in h and b'"idle"' in c:
                            got_idle = True
            out.append((time.perf_counter_ns() - t0) / 1e6)
        return out

    def stop(self, grace=3.0):
        """shutdown_request, then SIGKILL by pid after the grace period; closes the sockets."""
        if self.proc.poll() is None:
            try:
                self.send("shutdown_request", {"restart": False}, sock=self.control)
                self.proc.wait(timeout=grace)
            except (zmq.ZMQError, subprocess.TimeoutExpired):
                pass
            if self.proc.poll() is None:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                    self.proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
        LIVE.pop(self.pid, None)
        for s in self.socks:
            s.close(linger=0)
        self.socks = []
        try:
            self.km.cleanup_resources()
        except Exception:
            pass


# ---- the measurements ----------------------------------------------------------------------------------------

def per_request(k, before, after, n):
    return {"cpu_us": (after["cpu_ns"] - before["cpu_ns"]) / 1e3 / n,
            "cs": (after["vol"] + after["invol"] - before["vol"] - before["invol"]) / n,
            "wakeups": (after["vol"] - before["vol"]) / n}


def round_of(name, counts):
    """One fresh kernel: RSS after start, then pipelined and one-at-a-time CPU, switches and round trips."""
    k = Kernel(name)
    try:
        out = {"rss_start_mb": k.rss_start}
        k.pipelined(["pass"] * 100)                 # warm-up: first-cell imports, caches
        k.one_at_a_time(50)
        k.drain(0.1)
        a = snapshot(k.pid)
        secs = k.pipelined(["pass"] * counts["pipelined"])
        b = snapshot(k.pid)
        out.update({"pipe_" + key: v for key, v in per_request(k, a, b, counts["pipelined"]).items()})
        out["pipe_rps"] = counts["pipelined"] / secs
        k.drain(0.1)
        a = snapshot(k.pid)
        rts = k.one_at_a_time(counts["seq"])
        b = snapshot(k.pid)
        out.update({"seq_" + key: v for key, v in per_request(k, a, b, counts["seq"]).items()})
        out["rt_p50_ms"], out["rt_p99_ms"] = quantile(rts, 0.5), quantile(rts, 0.99)
        return out
    finally:
        k.stop()


def slope(points):
    """Least-squares slope of y over x; 0 for fewer than two points."""
    if len(points) < 2:
        return 0.0
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


def long_run(names, counts, note):
    """One fresh kernel each, alive together: idle wakeups over counts["idle"] s, then RSS over cells."""
    ks = {}
    out = {n: {} for n in names}
    try:
        for n in names:
            ks[n] = Kernel(n)
            ks[n].pipelined(["pass"] * 10)
        for k in ks.values():
            k.drain(0.2)
        time.sleep(0.5)
        note("idle: %.0f s, all kernels at once" % counts["idle"])
        before = {n: snapshot(k.pid) for n, k in ks.items()}
        time.sleep(counts["idle"])
        after = {n: snapshot(k.pid) for n, k in ks.items()}
        for n in names:
            out[n]["idle_wakeups"] = after[n]["vol"] + after[n]["invol"] - before[n]["vol"] - before[n]["invol"]
            out[n]["idle_threads"] = {"%s/%s" % (tid, comm): cs - before[n]["threads"].get(tid, ("", 0))[1]
                                      for tid, (comm, cs) in after[n]["threads"].items()
                                      if cs != before[n]["threads"].get(tid, ("", 0))[1]}
        note("cells: %d per kernel, in batches of %d" % (counts["cells"], BATCH))
        series = {n: [] for n in names}
        for b, start in enumerate(range(0, counts["cells"], BATCH)):
            order = names if b % 2 == 0 else names[::-1]
            end = min(start + BATCH, counts["cells"])
            for n in order:
                ks[n].pipelined(["x = %d" % i for i in range(start, end)])
                series[n].append((end, rss_mb(ks[n].pid)))
        for n in names:
            out[n]["rss_cells_mb"] = series[n][-1][1]
            out[n]["rss_growth_b"] = slope(series[n][len(series[n]) // 5:]) * 1048576
            out[n]["rss_series"] = series[n]
    finally:
        for k in ks.values():
            k.stop()
    return out


# ---- driver and report ----------------------------------------------------------------------------------------

def find(given, name):
    here = os.path.dirname(os.path.abspath(__file__))
    if given:
        return os.path.abspath(given)
    for cand in (os.path.join(here, "..", "build", name), os.path.join(here, "..", name), name):
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return os.path.abspath(cand)
    return shutil.which(name) or name


def write_specs(data_dir, argv):
    for name, cmd in argv.items():
        d = os.path.join(data_dir, "kernels", "bench-" + name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "kernel.json"), "w") as f:
            json.dump({"argv": cmd + ["-f", "{connection_file}"], "display_name": "bench " + name,
                       "language": "python", "interrupt_mode": "signal"}, f)


ROWS = [
    # key, label, format, goal: (kind, factor) against floor-py, or an absolute bound
    ("pipe_cpu_us", "CPU/request pipelined (us)", "%.0f", ("floor", 1.4)),
    ("seq_cpu_us", "CPU/request one at a time (us)", "%.0f", ("floor", 1.4)),
    ("rt_p50_ms", "round trip p50 (ms)", "%.3f", ("floor", 1.25)),
    ("rt_p99_ms", "round trip p99 (ms)", "%.3f", None),
    ("pipe_rps", "pipelined (req/s)", "%.0f", None),
    ("pipe_cs", "ctx switches/request pipelined", "%.2f", None),
    ("seq_cs", "ctx switches/request one at a time", "%.2f", None),
    ("pipe_wakeups", "wakeups/request pipelined", "%.2f", None),
    ("seq_wakeups", "wakeups/request one at a time", "%.2f", None),
    ("idle_wakeups", "idle wakeups (%.0f s)", "%d", ("abs", 0)),
    ("rss_start_mb", "RSS after start (MB)", "%.1f", ("abs", 15.0)),
    ("rss_cells_mb", "RSS after %d cells (MB)", "%.1f", None),
    ("rss_growth_b", "RSS growth (B/cell, last 80%)", "%.0f", ("abs", FLAT_B)),
]


def report(names, res, counts, paths):
    print("pyc-kernel: %s\nfloor-py:   %s\nipykernel:  %s" % (
        paths["pyc"], paths["floor-py"],
        ("%s -m ipykernel_launcher (Python %s)" % (sys.executable, platform.python_version()))
        if "ipykernel" in names else "(skipped)"))
    print("counts:     %d rounds of fresh kernels (medians), %d pipelined + %d one-at-a-time `pass` each; "
          "idle %.0f s; %d cells" % (counts["rounds"], counts["pipelined"], counts["seq"], counts["idle"],
                                     counts["cells"]))
    print("load:       %s (2-CPU machine shared with other work: expect noise, trust ratios of one run)"
          % " ".join("%.2f" % x for x in os.getloadavg()))
    print()
    hdr = "%-35s %10s %10s %10s %8s  %s" % ("", "pyc", "floor-py", "ipykernel", "pyc/fl", "goal for pyc")
    print(hdr)
    print("-" * (len(hdr) + 14))
    for key, label, fmt, goal in ROWS:
        if "%d" in label or "%.0f" in label:
            label = label % (counts["idle"] if key == "idle_wakeups" else counts["cells"])
        cells = []
        for n in NAMES:
            v = res.get(n, {}).get(key)
            cells.append("-" if v is None else fmt % v)
        p, f = res.get("pyc", {}).get(key), res.get("floor-py", {}).get(key)
        ratio = "%.2fx" % (p / f) if p is not None and f else "-"
        verdict = ""
        if goal and p is not None:
            kind, x = goal
            if kind == "floor" and f:
                verdict = "<= %.2fx floor-py: %s" % (x, "met" if p <= x * f else "NOT met")
            elif kind == "abs":
                verdict = "<= %s: %s" % (fmt % x, "met" if p <= x else "NOT met")
        print("%-35s %10s %10s %10s %8s  %s" % (label, cells[0], cells[1], cells[2], ratio, verdict))
    for n in names:
        woke = res.get(n, {}).get("idle_threads")
        if woke:
            print("idle, %s: %s" % (n, ", ".join("%s %d" % kv for kv in sorted(woke.items()))))
    for n in names:
        for e in res.get(n, {}).get("errors", []):
            print("ERROR %s: %s" % (n, e))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pyc", help="pyc-kernel (default: build/pyc-kernel, then ./pyc-kernel, then PATH)")
    ap.add_argument("--floor", help="floor-py (default: build/floor-py; `make floor-py` in the build dir)")
    ap.add_argument("--no-ipykernel", action="store_true", help="leave ipykernel out")
    ap.add_argument("--quick", action="store_true", help="smaller counts: %s" % QUICK)
    for key in FULL:
        ap.add_argument("--" + key, type=type(FULL[key]), help="default %s (--quick %s)" % (FULL[key], QUICK[key]))
    ap.add_argument("--json", metavar="FILE", help="write every number here")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    if args.json:
        args.json = os.path.abspath(args.json)
    counts = dict(QUICK if args.quick else FULL)
    for key in counts:
        if getattr(args, key) is not None:
            counts[key] = getattr(args, key)

    def note(msg):
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    paths = {"pyc": find(args.pyc, "pyc-kernel"), "floor-py": find(args.floor, "floor-py")}
    for n, p in paths.items():
        if not (os.path.isfile(p) and os.access(p, os.X_OK)):
            raise SystemExit("%s not found: %r (floor-py: `make -C build floor-py`)" % (n, p))
    names = [n for n in NAMES if not (n == "ipykernel" and args.no_ipykernel)]
    argv = {"pyc": [paths["pyc"]], "floor-py": [paths["floor-py"]],
            "ipykernel": [sys.executable, "-m", "ipykernel_launcher"]}

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    atexit.register(kill_all)
    workdir = tempfile.mkdtemp(prefix="pyc-bench-floor-")
    for var, sub in (("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_CONFIG_DIR", "config"), ("IPYTHONDIR", "ipython"), ("MPLCONFIGDIR", "mpl")):
        os.environ[var] = os.path.join(workdir, sub)
        os.makedirs(os.environ[var], exist_ok=True)
    os.environ["JUPYTER_PATH"] = os.environ["JUPYTER_DATA_DIR"]
    os.environ["JUPYTER_CONFIG_PATH"] = os.environ["JUPYTER_CONFIG_DIR"]
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    os.environ.pop("PYTHONSTARTUP", None)
    write_specs(os.environ["JUPYTER_DATA_DIR"], {n: argv[n] for n in names})
    os.chdir(workdir)

    rounds = {n: [] for n in names}
    errors = {n: [] for n in names}
    try:
        for r in range(counts["rounds"]):
            order = names[r % len(names):] + names[:r % len(names)]
            note("round %d of %d: %s" % (r + 1, counts["rounds"], ", ".join(order)))
            for n in order:
                try:
                    rounds[n].append(round_of(n, counts))
                except BenchError as e:
                    errors[n].append(str(e))
        res = {n: {} for n in names}
        for n in names:
            for key in rounds[n][0] if rounds[n] else []:
                res[n][key] = statistics.median(x[key] for x in rounds[n])
            res[n]["rounds"] = rounds[n]
        try:
            for n, v in long_run(names, counts, note).items():
                res[n].update(v)
        except BenchError as e:
            for n in names:
                errors[n].append("idle/cells run: %s" % e)
        for n in names:
            res[n]["errors"] = errors[n]
    finally:
        kill_all()
        os.chdir("/")
        shutil.rmtree(workdir, ignore_errors=True)

    report(names, res, counts, paths)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"counts": counts, "paths": paths, "results": res, "loadavg": os.getloadavg()}, f, indent=1)


if __name__ == "__main__":
    main()
