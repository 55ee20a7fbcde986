#!/usr/bin/env python3
"""`pyc run NAME "x"` end to end (a benchmark, not a test), beside a Python jupyter_client script doing the same.

    /usr/bin/python3 bench/bench_cli.py [--pyc build/pyc] [--kernel build/pyc-kernel] [--runs 50]

Both are timed from process start to exit, as an agent or a shell pays for them: `pyc run NAME x` and
`python3 client.py CONNECTION_FILE x`, where client.py loads the connection file into a BlockingKernelClient,
makes sure iopub is subscribed (kernel_info until an iopub message comes, as pyc does), runs the cell with
execute_interactive (output printed, reply and idle awaited) and stops its channels.  Both
talk to the same live session made by `pyc new`, in turns.  Also printed, as floors: the same spawn of
/bin/true, and of `pyc --version` (process start and dynamic linking, with no connection: pyc links only
jansson and libc, since it speaks ZMTP itself, hashes with its own SHA-256 and loads readline only for attach).

Target (issue 6): pyc median <= 5 ms.  The session and every process are ended by pid at the end.

A warm pool (issue 12), timed after that: a template session that has done `import numpy, pandas` is forked
into a new session, timed from the start of `pyc fork template sN` to the end of the first `pyc run sN "x=1"`
(the new session has answered), against a cold start, `pyc new sN` then `pyc run sN "import numpy, pandas"`.
Each new session is killed before the next run (not timed).  --quick: 10 runs of `pyc run`, 5 of each start.

Fire and poll (issue 12), in the same session as `pyc run`: `pyc fire NAME x` from spawn to exit (the receipt:
the kernel holds the cell), and `pyc fire` followed by `pyc poll NAME ID --wait` to the end of the cell's
output, beside `pyc run NAME x`, which does the same in one process.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

CLIENT = r'''
import queue
import sys
from jupyter_client import BlockingKernelClient
kc = BlockingKernelClient()
kc.load_connection_file(sys.argv[1])
kc.start_channels()
# iopub must be subscribed before the cell runs, or its output and idle are lost (the slow joiner):
# ask kernel_info until an iopub message comes, as pyc does.
while True:
    kc.kernel_info()
    try:
        kc.get_iopub_msg(timeout=0.05)
        break
    except queue.Empty:
        pass
reply = kc.execute_interactive(sys.argv[2], timeout=60)
kc.stop_channels()
sys.exit(0 if reply["content"]["status"] == "ok" else 1)
'''


def spawn_ms(argv, env, runs):
    """Wall times in ms of `runs` spawns of argv, stdout and stderr to /dev/null, each to its exit."""
    null = os.open(os.devnull, os.O_WRONLY)
    out = []
    try:
        fa = [(os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)]
        for _ in range(runs):
            t0 = time.perf_counter()
            pid = os.posix_spawn(argv[0], argv, env, file_actions=fa)
            _, status = os.waitpid(pid, 0)
            out.append((time.perf_counter() - t0) * 1000)
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError("%s exited with %d" % (" ".join(argv), os.waitstatus_to_exitcode(status)))
    finally:
        os.close(null)
    return out


def timed_ms(steps, env):
    """Wall time in ms of running the argv lists in steps one after the other, each to its exit (output to
    /dev/null); returns (ms, stdout of the first step)."""
    t0 = time.perf_counter()
    first = None
    for i, argv in enumerate(steps):
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        if p.returncode != 0:
            raise RuntimeError("%s exited with %d: %s" % (" ".join(argv), p.returncode, p.stderr.strip()))
        if i == 0:
            first = p.stdout
    return (time.perf_counter() - t0) * 1000, first


def end_session(pyc, name, pid, env):
    subprocess.run([pyc, "kill", name], env=env, capture_output=True, timeout=60)
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def warm_pool(pyc, env, runs):
    """The warm-pool comparison (see the top of this file); returns (fork_ms, cold_ms)."""
    template, template_pid = "template", None
    fork_ms, cold_ms = [], []
    try:
        p = subprocess.run([pyc, "new", template, "--json"], env=env, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise RuntimeError("pyc new %s failed (%d): %s" % (template, p.returncode, p.stderr))
        template_pid = json.loads(p.stdout)["pid"]
        subprocess.run([pyc, "run", template, "import numpy, pandas"], env=env, check=True, capture_output=True)
        for i in range(runs + 1):             # the first of each is a warm-up, not counted
            name = "warm%d" % i
            ms, out = timed_ms([[pyc, "fork", template, name, "--json"], [pyc, "run", name, "x=1"]], env)
            end_session(pyc, name, json.loads(out)[0]["pid"], env)
            if i > 0:
                fork_ms.append(ms)
            name = "cold%d" % i
            ms, out = timed_ms([[pyc, "new", name, "--json"], [pyc, "run", name, "import numpy, pandas"]], env)
            end_session(pyc, name, json.loads(out)["pid"], env)
            if i > 0:
                cold_ms.append(ms)
    finally:
        end_session(pyc, template, template_pid, env)
    return fork_ms, cold_ms


def fire_poll(pyc, name, env, runs):
    """`pyc fire` alone, and fire then `poll --wait`, each in ms from the first spawn to the last exit."""
    fire_ms, both_ms = [], []
    for i in range(runs + 2):                 # the first two are warm-ups, not counted
        t0 = time.perf_counter()
        p = subprocess.run([pyc, "fire", name, "x"], env=env, capture_output=True, text=True, timeout=60)
        t1 = time.perf_counter()
        if p.returncode != 0:
            raise RuntimeError("pyc fire failed (%d): %s" % (p.returncode, p.stderr))
        q = subprocess.run([pyc, "poll", name, p.stdout.strip(), "--wait"], env=env, capture_output=True,
                           timeout=60)
        t2 = time.perf_counter()
        if q.returncode != 0:
            raise RuntimeError("pyc poll failed (%d): %s" % (q.returncode, q.stderr))
        if i >= 2:
            fire_ms.append((t1 - t0) * 1000)
            both_ms.append((t2 - t0) * 1000)
    return fire_ms, both_ms


def row(label, ms):
    if len(ms) < 10:             # too few for deciles: the extremes
        return "%-44s median %8.2f ms   min %8.2f   max %8.2f   (%d runs)" % (label, statistics.median(ms), min(ms),
                                                                            max(ms), len(ms))
    q = statistics.quantiles(ms, n=10)
    return "%-44s median %8.2f ms   p10 %8.2f   p90 %8.2f   (%d runs)" % (label, statistics.median(ms), q[0], q[8],
                                                                          len(ms))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pyc", default=os.path.join(here, "..", "build", "pyc"), help="the pyc program")
    ap.add_argument("--kernel", default=None, help="pyc-kernel (default: beside pyc)")
    ap.add_argument("--runs", type=int, default=50, help="runs of each (default 50)")
    ap.add_argument("--python", default="/usr/bin/python3", help="the Python with jupyter_client")
    ap.add_argument("--code", default="x")
    ap.add_argument("--pool-runs", type=int, default=10, help="runs of each way to a numpy+pandas session")
    ap.add_argument("--quick", action="store_true", help="10 runs of pyc run, 5 of each start")
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.pool_runs = 10, 5
    pyc = os.path.abspath(args.pyc)
    kernel = os.path.abspath(args.kernel or os.path.join(os.path.dirname(pyc), "pyc-kernel"))
    for p in (pyc, kernel):
        if not os.access(p, os.X_OK):
            sys.exit("bench_cli: %s is not an executable (build first, or give --pyc / --kernel)" % p)

    tmp = tempfile.mkdtemp(prefix="pyc-bench-cli-")
    env = dict(os.environ)
    for var, sub in (("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_PATH", "path"),
                     ("JUPYTER_CONFIG_DIR", "config"), ("IPYTHONDIR", "ipython")):
        env[var] = os.path.join(tmp, sub)
        os.makedirs(env[var])
    env["PYC_KERNEL"] = kernel
    env["PYC_HISTORY_FILE"] = ":memory:"
    env.pop("JPY_PARENT_PID", None)
    script = os.path.join(tmp, "client.py")
    with open(script, "w") as f:
        f.write(CLIENT)

    name = "bench"
    pid = None
    try:
        p = subprocess.run([pyc, "new", name, "--json"], env=env, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            sys.exit("bench_cli: pyc new failed (%d): %s" % (p.returncode, p.stderr))
        info = json.loads(p.stdout)
        pid, connfile = info["pid"], info["connection_file"]
        subprocess.run([pyc, "run", name, "x = 1"], env=env, check=True, capture_output=True)

        pyc_argv = [pyc, "run", name, args.code]
        py_argv = [args.python, script, connfile, args.code]
        # warm both up (page cache, the kernel's first requests), then alternate in blocks of 10
        spawn_ms(pyc_argv, env, 5)
        spawn_ms(py_argv, env, 2)
        pyc_ms, py_ms = [], []
        while len(pyc_ms) < args.runs or len(py_ms) < args.runs:
            if len(pyc_ms) < args.runs:
                pyc_ms += spawn_ms(pyc_argv, env, min(10, args.runs - len(pyc_ms)))
            if len(py_ms) < args.runs:
                py_ms += spawn_ms(py_argv, env, min(10, args.runs - len(py_ms)))
        true_ms = spawn_ms(["/bin/true"], env, args.runs)
        version_ms = spawn_ms([pyc, "--version"], env, args.runs)

        med_pyc, med_py = statistics.median(pyc_ms), statistics.median(py_ms)
        print("pyc run %s %r, end to end (spawn to exit)" % (name, args.code))
        print(row("pyc run", pyc_ms))
        print(row("python3 + jupyter_client (execute_interactive)", py_ms))
        print("%-44s %8.1fx faster" % ("ratio (jupyter_client / pyc)", med_py / med_pyc))
        print("floors:")
        print(row("  /bin/true", true_ms))
        print(row("  pyc --version (start + dynamic linking)", version_ms))
        print("target: pyc median <= 5 ms: %s (%.2f ms)" % ("met" if med_pyc <= 5 else "NOT met", med_pyc))
        fire_ms, fire_poll_ms = fire_poll(pyc, name, env, args.runs)
        print("fire and poll, the same cell:")
        print(row("  pyc fire (to the receipt)", fire_ms))
        print(row("  pyc fire; pyc poll ID --wait (to the output)", fire_poll_ms))
        print("%-44s %8.2fx" % ("  ratio (fire + poll / run)", statistics.median(fire_poll_ms) / med_pyc))
        fork_ms, cold_ms = warm_pool(pyc, env, args.pool_runs)
        print("a session with numpy and pandas imported, to its first answer:")
        print(row("  pyc fork template sN; pyc run sN x=1", fork_ms))
        print(row("  pyc new sN; pyc run sN 'import numpy, pandas'", cold_ms))
        print("%-44s %8.1fx faster" % ("  ratio (cold / warm pool)", statistics.median(cold_ms) /
                                       statistics.median(fork_ms)))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"pyc_ms": pyc_ms, "jupyter_client_ms": py_ms, "true_ms": true_ms,
                           "pyc_version_ms": version_ms, "warm_pool_fork_ms": fork_ms, "cold_start_ms": cold_ms,
                           "fire_ms": fire_ms, "fire_poll_ms": fire_poll_ms}, f)
    finally:
        end_session(pyc, name, pid, env)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
