#!/usr/bin/python3
"""bench_subshell.py -- what kernel subshells cost and give. A measurement, not a test.

    /usr/bin/python3 bench/bench_subshell.py [--pyc PATH] [--only pyc|ipykernel] [--quick]

Uses bench.py's kernel and lean client.  For each kernel that can (ipykernel 6.17, the Debian reference, has no
subshells: its rows say so), it prints:

  1) the main shell's `pass` round trip (reply and idle), p50 and p99, before any subshell exists, and again
     once one does (pyc then reads shell on a thread of its own and routes every request: this is the cost of
     that hop);
  2) a subshell's round trip for `1` (execute_reply and idle), median of N, while the main shell is
       idle;
       asleep in time.sleep (the GIL is free);
       busy in a pure-Python loop (the GIL changes hands every 5 ms, sys.getswitchinterval());
       busy in one C call that holds the GIL throughout (sum(range(...)), about 1 s): the subshell waits
       until the call returns, whatever the kernel -- the row shows how long that is.
The main shell's busy cell is started, 0.2 s allowed for it to begin, then the subshell requests are sent one
after another while it runs.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

BUSY = {
    "idle": None,
    "time.sleep": "import time; time.sleep(%(s)s)",
    "pure Python loop": "import time\nend = time.time() + %(s)s\nwhile time.time() < end:\n    pass",
    "C call holding the GIL": "sum(range(%(n)d))",
}


def control(k, msg_type, content=None, timeout=10.0):
    msg_id = k.send(msg_type, content or {}, sock=k.control)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if k.control.poll(200):
            header, parent, content = k.recv(k.control)
            if parent.get("msg_id") == msg_id:
                return bench.json.loads(content)
    raise bench.BenchError("no %s reply" % msg_type)


def send_on(k, code, subshell_id):
    msg = k.session.msg("execute_request", {"code": code, "silent": False, "store_history": True,
                                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
    msg["header"]["subshell_id"] = subshell_id
    bench.send_frames(k.shell, k.session.serialize(msg))
    return msg["header"]["msg_id"]


def subshell_latency(k, sub, busy, n, c_call_n):
    """n subshell round trips (ms) while the main shell runs the cell BUSY[busy] (None: none)."""
    main_id = None
    if BUSY[busy] is not None:
        main_id = send_on(k, BUSY[busy] % {"s": 60, "n": c_call_n}, None)
        time.sleep(0.2)
    out = []
    deadline = time.monotonic() + 60
    for _ in range(n):
        t0 = bench.now()
        msg_id = send_on(k, "1", sub)
        k.wait_reply_idle(msg_id, 60)
        out.append((bench.now() - t0) / 1e6)
        if busy == "C call holding the GIL" or time.monotonic() > deadline:
            break                  # every later request would find the call over
    if main_id is not None:
        control(k, "interrupt_request")
        try:
            k.wait_reply_idle(main_id, 60)
        except bench.BenchError:
            pass                   # interrupted: an error reply, as asked
    return out


def c_call_size(k):
    """A sum(range(N)) that takes about 1 s in this kernel."""
    n = 10 ** 7
    t0 = time.monotonic()
    k.execute("sum(range(%d))" % n)
    took = max(time.monotonic() - t0, 0.01)
    return int(n / took)


def run_one(name, k, quick):
    rows = []
    n_pass = 300 if quick else 2000
    k.start()
    try:
        k.execute("pass")
        lat = bench.pass_latency(k, n_pass)
        rows.append(("main `pass`, no subshell", "p50 %.3f ms  p99 %.3f ms" % (bench.quantile(lat, 0.5),
                                                                              bench.quantile(lat, 0.99))))
        created = control(k, "create_subshell_request")
        if created.get("status") != "ok":
            rows.append(("subshells", "not supported (%s)" % created.get("evalue", created)))
            return rows
        sub = created["subshell_id"]
        lat = bench.pass_latency(k, n_pass)
        rows.append(("main `pass`, one subshell", "p50 %.3f ms  p99 %.3f ms" % (bench.quantile(lat, 0.5),
                                                                               bench.quantile(lat, 0.99))))
        xs = [x for x in subshell_latency(k, None, "idle", 20 if quick else 100, 0)]
        rows.append(("main `1` (for comparison)", "median %.3f ms (n=%d)" % (statistics.median(xs), len(xs))))
        n_call = c_call_size(k)
        for busy in BUSY:
            xs = subshell_latency(k, sub, busy, 5 if quick else 20, n_call)
            rows.append(("subshell `1`, main %s" % busy,
                         "median %.3f ms (n=%d)" % (statistics.median(xs), len(xs)) if xs else "no sample"))
    except bench.BenchError as e:
        rows.append(("error", bench.short(e)))
    finally:
        k.stop()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pyc", default=None)
    ap.add_argument("--only", choices=("pyc", "ipykernel"))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pyc-bench-sub-") as workdir:
        env = dict(os.environ)
        for var in ("JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
            env[var] = os.path.join(workdir, var.lower())
            os.makedirs(env[var], exist_ok=True)
        env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        pyc = bench.find_pyc(args.pyc)
        argv = {"pyc": lambda cf: [pyc, "-f", cf],
                "ipykernel": lambda cf: [sys.executable, "-m", "ipykernel_launcher", "-f", cf]}
        names = [n for n in ("pyc", "ipykernel") if args.only in (None, n)]
        for name in names:
            k = bench.Kernel(name, argv[name], workdir, env, 3.0, 60.0)
            print("== %s" % name)
            for label, value in run_one(name, k, args.quick):
                print("  %-40s %s" % (label, value))
        bench.kill_all()


if __name__ == "__main__":
    main()
