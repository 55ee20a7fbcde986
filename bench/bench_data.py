#!/usr/bin/python3
"""bench_data.py -- big results, displays and streams: pyc beside ipykernel (and xeus-python when installed),
in one run, with ratios.  A measurement, not a test.

    /usr/bin/python3 bench/bench_data.py [--pyc PATH] [--xeus PATH] [--only NAME] [--quick] [--json FILE]

Rows (each the median of N runs on one long-lived kernel per kind, kinds measured in alternation so that
drift in machine load falls on all alike; times from just before the request is sent to the moment both its
execute_reply and its idle status have arrived):

  bytes10     `b'x' * 10485760` as the last expression: an execute_result of 10 MB of text/plain
  list1m      `list(range(1000000))`: an execute_result cut by the pretty printer (a few KB); on this VM
              making and freeing the million ints is most of it (page faults), see list1m-x
  list1m-x    the same list, made by the setup cell, as the last expression: the kernel's part alone
              (the pretty printer's layout, which stops after 1000 items, and the message)
  pandas      `pd.DataFrame(np.random.rand(1000000, 10)).describe()`: the wall time minus the time spent
              inside the cell (read back with user_expressions), i.e. the kernel's overhead around a cell
              with a small result after a long computation
  png5        an object whose _repr_png_ returns 5 MB of PNG, as the last expression (base64 in JSON)
  html10k     a 10,000-row DataFrame as the last expression, with display.max_rows raised so that every
              row is in its HTML
  stdout      10 MiB written with print() in 64 KiB pieces: MB/s from request to idle
  peak100     a 100 MB bytes result: the kernel's peak RSS (VmHWM, reset before the cell) above its RSS
              before the cell, in MB
  floor       one 10 MB ZeroMQ message, one way over loopback TCP, in this process (the transport's floor
              for bytes10)

The client is bench.py's: pyzmq with no threads, replies not signature-checked and parsed only as far as
needed; a big content frame is received but never decoded, except that its size is checked (an
execute_result or display_data smaller than the data it must carry makes the row an error).  Every kernel
started is ended by its pid.  Jupyter's and IPython's directories point into a temporary directory.
"""
import argparse
import atexit
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time

import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (bench.py: the kernel process, the lean client, the driver's helpers)
from bench import NOBLOCK, BenchError, Kernel, find_pyc, kill_all, now, on_signal, recv_frames, send_frames, short  # noqa: E402,E501

MB = 1000000

SETUP = ("import numpy as np, pandas as pd, base64, os, time as _bench_time\n"
         "pd.set_option('display.max_rows', 20000)\n"
         "_bench_png = b'\\x89PNG\\r\\n\\x1a\\n' + os.urandom(5 * 1048576)\n"
         "class _BenchPNG:\n"
         "    def _repr_png_(self):\n"
         "        return _bench_png\n"
         "    def __repr__(self):\n"
         "        return '<png>'\n"
         "_bench_l = list(range(1000000))\n"
         "_bench_df = pd.DataFrame(np.arange(10000 * 8).reshape(10000, 8), columns=list('abcdefgh'))\n")

# name -> (code, the least number of bytes its output frames must hold, label, format)
ROWS = [
    ("bytes10", "b'x' * 10485760", 10485760, "b'x' * 10485760 result (ms)", "%.1f"),
    ("list1m", "list(range(1000000))", 1000, "list(range(1000000)) (ms)", "%.1f"),
    ("list1m-x", "_bench_l", 1000, "the same list, made before (ms)", "%.1f"),
    ("pandas", None, 100, "pandas describe overhead (ms)", "%.1f"),
    ("png5", "_BenchPNG()", 5 * 1048576 * 4 // 3, "5 MB PNG display (ms)", "%.1f"),
    ("html10k", "_bench_df", 10000 * 8 * 10, "10,000-row DataFrame HTML (ms)", "%.1f"),
    ("stdout", "_s = 'x' * 65535\nfor _ in range(160): print(_s)", 160 * 65536, "stdout, 64 KiB prints (MB/s)",
     "%.0f"),
    ("peak100", "b'x' * 104857600", 104857600, "peak RSS over a 100 MB result (MB)", "%.0f"),
]
GOALS = {"bytes10": ("<=", 60.0), "list1m": ("<=", 10.0), "pandas": ("<=", 5.0), "stdout": (">=", 800.0),
         "peak100": ("<=", 200.0)}
PANDAS = ("_bench_t0 = _bench_time.perf_counter()\n"
          "_bench_r = pd.DataFrame(np.random.rand(1000000, 10)).describe()\n"
          "_bench_in = _bench_time.perf_counter() - _bench_t0\n"
          "_bench_r")


def run_cell(k, code, least, user_expressions=None, timeout=300.0):
    """Runs code; returns (ms from send to reply and idle, bytes of output frames, reply content or None).

    Output frames are the content frames of the request's execute_result, display_data and stream messages;
    the reply's content is decoded only when user_expressions were asked for."""
    content = {"code": code, "silent": False, "store_history": True, "user_expressions": user_expressions or {},
               "allow_stdin": False, "stop_on_error": True}
    msg_id, frames = k.build("execute_request", content)
    mid = b'"' + msg_id.encode() + b'"'
    shell, poller, split = k.shell, k.poller, k.split
    got_reply = got_idle = False
    out = 0
    reply = None
    t0 = now()
    send_frames(shell, frames)
    deadline = time.monotonic() + timeout
    while not (got_reply and got_idle):
        events = poller.poll(1000)
        if not events:
            k.check_alive()
            if time.monotonic() > deadline:
                raise BenchError("no reply and idle within %.0f s" % timeout)
        for sock, _ in events:
            while True:
                try:
                    frames_in = recv_frames(sock, NOBLOCK)
                except zmq.Again:
                    break
                h, p, c = split(frames_in)
                if mid not in p:
                    continue
                if sock is shell:
                    if b'"ok"' not in c[:4096] and b'"status": "ok"' not in c and b'"status":"ok"' not in c:
                        raise BenchError("execute_reply not ok: %s" % c[:300].decode("utf-8", "replace"))
                    if user_expressions:
                        reply = json.loads(c)
                    got_reply = True
                elif b'"status"' in h[:200] and b'"idle"' in c[:200]:
                    got_idle = True
                elif b'"execute_result"' in h or b'"display_data"' in h or b'"stream"' in h:
                    out += len(c)
    ms = (now() - t0) / 1e6
    if out < least:
        raise BenchError("%d bytes of output, fewer than the %d the result must hold" % (out, least))
    return ms, out, reply


def vm(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise BenchError("no %s for %d" % (field, pid))


def measure_row(k, name, code, least):
    """One sample of a row."""
    if name == "pandas":
        ms, _, _ = run_cell(k, PANDAS, least)
        _, _, reply = run_cell(k, "pass", 0, user_expressions={"t": "_bench_in"})
        t = reply["user_expressions"]["t"]
        if t.get("status") != "ok":
            raise BenchError("cannot read the time inside the cell: %r" % (t,))
        return ms - 1000.0 * float(t["data"]["text/plain"])
    if name == "stdout":
        ms, out, _ = run_cell(k, code, least)
        return (160 * 65536 / MB) / (ms / 1000.0)
    if name == "peak100":
        pid = k.proc.pid
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")                  # resets VmHWM to the current RSS
        before = vm(pid, "VmRSS")
        run_cell(k, code, least)
        return vm(pid, "VmHWM") - before
    ms, _, _ = run_cell(k, code, least)
    return ms


def floor_ms(n):
    """Median ms of one 10 MB message, one way, PUSH to PULL over loopback TCP (both in this process; the
    receiving side copies the frame out, as a client does)."""
    ctx = zmq.Context.instance()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    try:
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        push.connect("tcp://127.0.0.1:%d" % port)
        payload = b"x" * 10485760
        push.send(b"warm")
        pull.recv()
        times = []
        for _ in range(n):
            t0 = now()
            push.send(payload, copy=False)
            pull.recv(copy=True)
            times.append((now() - t0) / 1e6)
        return statistics.median(times)
    finally:
        pull.close(linger=0)
        push.close(linger=0)


def main():
    ap = argparse.ArgumentParser(description="Big results, displays and streams: pyc beside ipykernel and "
                                             "xeus-python.")
    ap.add_argument("--pyc", metavar="PATH", help="pyc-kernel binary (default: as bench.py finds it); '' skips pyc")
    ap.add_argument("--xeus", metavar="PATH", help="xeus-python's xpython (default: xpython on PATH, if any)")
    ap.add_argument("--only", choices=["pyc", "ipykernel", "xeus-python"], help="measure one kernel only")
    ap.add_argument("--quick", action="store_true", help="3 samples a row instead of 7")
    ap.add_argument("--rows", help="comma-separated row names to run (default: all)")
    ap.add_argument("--json", metavar="FILE", help="also write the numbers as JSON to FILE")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args()
    samples = 3 if args.quick else 7
    rows = [r for r in ROWS if not args.rows or r[0] in args.rows.split(",")]

    atexit.register(kill_all)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    workdir = tempfile.mkdtemp(prefix="pyc-bench-data-")
    env = dict(os.environ)
    for var, sub in (("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_CONFIG_DIR", "config"), ("IPYTHONDIR", "ipython"), ("MPLCONFIGDIR", "mpl")):
        env[var] = os.path.join(workdir, sub)
        os.makedirs(env[var], exist_ok=True)
    env["JUPYTER_PATH"] = env["JUPYTER_DATA_DIR"]
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    env.pop("PYTHONSTARTUP", None)
    env["PYC_OUTPUT_LIMIT"] = "0"           # no output cap: the 100 MB row must reach the client whole

    pyc_path = find_pyc(args.pyc)
    xeus = args.xeus if args.xeus is not None else (shutil.which("xpython") or "")
    argv = {"pyc": lambda cf: [pyc_path, "-f", cf],
            "ipykernel": lambda cf: [sys.executable, "-m", "ipykernel_launcher", "-f", cf],
            "xeus-python": lambda cf: [xeus, "-f", cf]}
    names = [n for n in ("pyc", "ipykernel", "xeus-python") if (args.only in (None, n))
             and not (n == "pyc" and pyc_path == "") and not (n == "xeus-python" and not xeus)]
    kernels, res, err = {}, {n: {} for n in names}, {n: {} for n in names}

    def note(msg):
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    try:
        for n in names:
            try:
                k = kernels[n] = Kernel(n, argv[n], workdir, env, 3.0, 60.0)
                k.start()
                k.execute(SETUP, timeout=120)
            except Exception as e:
                err[n]["all"] = short(e)
        active = [n for n in names if "all" not in err[n]]
        for name, code, least, label, fmt in rows:
            note("%s: %d samples per kernel" % (name, samples))
            got = {n: [] for n in active}
            for n in active:                  # one warm-up each, not counted
                try:
                    measure_row(kernels[n], name, code, least)
                except Exception as e:
                    err[n][name] = short(e)
            for i in range(samples):
                for n in (active if i % 2 == 0 else active[::-1]):
                    if name in err[n]:
                        continue
                    try:
                        got[n].append(measure_row(kernels[n], name, code, least))
                    except Exception as e:
                        err[n][name] = short(e)
                        if not kernels[n].alive():
                            kernels[n].stop()
                            kernels[n].start()
                            kernels[n].execute(SETUP, timeout=120)
            for n in active:
                if got[n] and name not in err[n]:
                    res[n][name] = statistics.median(got[n])
        floor = floor_ms(samples)
    finally:
        for k in kernels.values():
            k.stop()
        kill_all()
        shutil.rmtree(workdir, ignore_errors=True)

    head = "%-36s" % "" + "".join("%13s" % n for n in names) + "%10s" % "goal" + "".join(
        "%14s" % ("pyc/" + n[:4]) for n in names if n != "pyc")
    print("pyc-kernel: %s   %d samples a row, medians; times: lower is better, so a ratio < 1 favours pyc;"
          " rates: higher is better" % (pyc_path, samples))
    print(head)
    print("-" * len(head))
    for name, code, least, label, fmt in rows:
        line = "%-36s" % label
        for n in names:
            e = err[n].get("all") or err[n].get(name)
            line += "%13s" % ("ERROR" if e else (fmt % res[n][name] if name in res[n] else "-"))
        goal = GOALS.get(name)
        line += "%10s" % ("%s %g" % goal if goal else "")
        for n in names:
            if n == "pyc":
                continue
            a, b = res.get("pyc", {}).get(name), res[n].get(name)
            line += "%14s" % ("%.2fx" % (a / b) if a is not None and b else "-")
        print(line)
    print("%-36s%13.1f   (one 10 MB ZeroMQ message, one way, in this process)" % ("floor for bytes10 (ms)", floor))
    for n in names:
        for what, e in sorted(err[n].items()):
            print("error: %s, %s: %s" % (n, what, e))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pyc": pyc_path, "samples": samples,
                       "floor_ms": floor, "results": res, "errors": err}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    threading.current_thread().name = "bench_data"
    main()
