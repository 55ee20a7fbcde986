#!/usr/bin/python3
"""bench_template.py -- kernels from a warm template against cold starts, pyc and ipykernel side by side in one
run. A measurement, not a test.

    /usr/bin/python3 bench/bench_template.py [--pyc PATH] [--starts 10] [--density 1000] [--preload CODE]

Three kernelspecs, all started through jupyter_client's KernelManager:
  ipykernel      python -m ipykernel_launcher, cold, then the start-up code run as a cell;
  pyc            pyc-kernel, cold, then the start-up code run as a cell;
  pyc-template   pyc_client's pyc-template-provisioner: a fork of the template that ran the code once.
It prints, as medians of --starts:
  1) start to kernel_info_reply (KernelManager.start_kernel, a client, wait_for_ready), and for the template
     the part of it spent in the provisioner's launch_kernel (the fork's round trip: the rest is
     jupyter_client's own and the client's);
  2) start until the start-up code has run (for the template: the same as 1);
  3) restart_kernel() wall time, now=False and now=True (for ipykernel and cold pyc a restart is a cold start
     again, without the code; the call returns when jupyter_client has launched the new kernel);
  4) --density N sessions forked from one template (batches of 100, each ended when this process ends), a cell
     run in each, then, after 5 s of quiet: their total PSS and private memory, the mean per session, the CPU
     they used in 10 s of idling, and where one idle session's private pages are (/proc/PID/smaps).
Everything runs in a temporary Jupyter environment; every kernel is ended by its pid.
"""
import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402

NAMES = ("ipykernel", "pyc", "pyc-template")
PIDS = set()


def environment(workdir, pyc, preload):
    for var, sub in (("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_PATH", "path"),
                     ("JUPYTER_CONFIG_DIR", "config"), ("IPYTHONDIR", "ipython"), ("HOME", "home")):
        os.environ[var] = os.path.join(workdir, sub)
        os.makedirs(os.environ[var], exist_ok=True)
    os.environ.pop("JUPYTER_CONFIG_PATH", None)
    specs = {
        "ipykernel": ([sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"], {}),
        "pyc": ([pyc, "-f", "{connection_file}"], {}),
        "pyc-template": ([pyc, "-f", "{connection_file}"], {"kernel_provisioner": {
            "provisioner_name": "pyc-template-provisioner",
            "config": {"template": "bench", "preload": preload}}}),
    }
    for name, (argv, meta) in specs.items():
        kdir = os.path.join(os.environ["JUPYTER_PATH"], "kernels", name)
        os.makedirs(kdir, exist_ok=True)
        with open(os.path.join(kdir, "kernel.json"), "w") as f:
            json.dump({"argv": argv, "display_name": name, "language": "python", "interrupt_mode": "signal",
                       "metadata": meta}, f)
    sys.path[:0] = [os.path.join(HERE, "..", "cli", "python"), os.path.join(workdir, "site")]
    from pyc_client._provisioner import write_dist_info
    write_dist_info(os.path.join(workdir, "site"))


def kernel_pid(km):
    p = km.provisioner
    return getattr(p, "pid", None) or getattr(getattr(p, "process", None), "pid", None)


def run_cell(kc, code):
    msg_id = kc.execute(code)
    reply = kc.get_shell_msg(timeout=120)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=120)
    assert reply["content"]["status"] == "ok", reply["content"]


def kernel_info(kc, timeout=60):
    """Sends kernel_info_request until one is answered (a kernel still starting may not have its shell socket
    bound yet; ZeroMQ queues the request until it has) and returns when the reply is in.  Not wait_for_ready,
    which also waits for 0.2 s of iopub silence after the reply (jupyter_client's), the same for every
    kernel."""
    deadline = time.monotonic() + timeout
    msg_id = kc.kernel_info()
    while time.monotonic() < deadline:
        try:
            reply = kc.get_shell_msg(timeout=1)
        except Exception:  # noqa: BLE001 -- queue.Empty: not yet
            continue
        if reply["parent_header"].get("msg_id") == msg_id:
            return
    raise TimeoutError("no kernel_info_reply within %g s" % timeout)


def start(name, preload, launch_times):
    """(km, kc, ms to kernel_info_reply, ms until the start-up code has run)."""
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name=name)
    t0 = time.perf_counter()
    km.start_kernel(stdout=open(os.devnull, "wb"), stderr=open(os.devnull, "wb"))
    PIDS.add(kernel_pid(km))
    kc = km.client()
    kc.start_channels()
    kernel_info(kc)
    ready = (time.perf_counter() - t0) * 1000
    if name != "pyc-template":
        run_cell(kc, preload)
    warm = (time.perf_counter() - t0) * 1000
    return km, kc, ready, warm


def timed_launch():
    """Wraps the template provisioner's launch_kernel to record how long each start's took (ms)."""
    from pyc_client._template import TemplateProvisioner

    times = []
    original = TemplateProvisioner.launch_kernel

    async def launch_kernel(self, cmd, **kwargs):
        first = self._connection is None          # a start, not a restart in place (which forks anew)
        t0 = time.perf_counter()
        try:
            return await original(self, cmd, **kwargs)
        finally:
            if first:
                times.append((time.perf_counter() - t0) * 1000)

    TemplateProvisioner.launch_kernel = launch_kernel
    return times


def stop(km, kc):
    kc.stop_channels()
    pid = kernel_pid(km)
    try:
        km.shutdown_kernel(now=True)
    except Exception:  # noqa: BLE001
        pass
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def starts(name, n, preload, launch_times):
    """Medians (ms): start to kernel_info_reply, start until the code has run, and the wall time of
    restart_kernel(now=False) and of restart_kernel(now=True) (the call; the client then reconnects on its
    own, after ZeroMQ's reconnect interval, whatever the kernel)."""
    ready, warm, restart, restart_now = [], [], [], []
    for i in range(n):
        km, kc, r, w = start(name, preload, launch_times)
        ready.append(r)
        warm.append(w)
        for now, into in ((False, restart), (True, restart_now)):
            t0 = time.perf_counter()
            km.restart_kernel(now=now)
            into.append((time.perf_counter() - t0) * 1000)
            kernel_info(kc)
            PIDS.add(kernel_pid(km))
        stop(km, kc)
    return [statistics.median(x) for x in (ready, warm, restart, restart_now)]


def smaps(pid):
    """{mapping name: private kB} of one process."""
    out, name = {}, None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and "-" in parts[0] and ":" not in parts[0]:
                name = parts[5] if len(parts) > 5 else "[anon]"
                if name.startswith("/"):
                    name = os.path.basename(name)
            elif parts[0] == "Private_Dirty:":
                out[name] = out.get(name, 0) + int(parts[1])
    return out


def rollup(pid):
    vals = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            parts = line.split()
            if parts[0].endswith(":") and len(parts) >= 2 and parts[1].isdigit():
                vals[parts[0][:-1]] = int(parts[1])
    return vals


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def density(n, preload):
    from jupyter_client import BlockingKernelClient
    from pyc_client import _template

    km, kc, _, _ = start("pyc-template", preload, [])
    template = next(iter(_template._templates.values()))
    import asyncio

    sessions = []
    t0 = time.perf_counter()
    while len(sessions) < n:
        batch = min(100, n - len(sessions))
        answer = asyncio.run(template.fork({"n": batch, "watch": os.getpid()}, 120))
        for c in answer.get("children", []):
            PIDS.add(c["pid"])
            sessions.append(c)
        if answer.get("status") != "ok":
            print("  fork stopped at %d sessions: %s" % (len(sessions), answer.get("evalue")))
            break
    fork_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for c in sessions:
        client = BlockingKernelClient()
        client.load_connection_info(dict(c["connection"], key=c["connection"]["key"].encode()))
        client.start_channels()
        run_cell(client, "x = 1")
        client.stop_channels()
    cells_s = time.perf_counter() - t0
    time.sleep(5)
    pids = [c["pid"] for c in sessions]
    before = {p: cpu_ticks(p) for p in pids}
    time.sleep(10)
    ticks = sum(cpu_ticks(p) - before[p] for p in pids)
    rolls = [rollup(p) for p in pids]
    pss = sum(r.get("Pss", 0) for r in rolls) + rollup(template.pid).get("Pss", 0)
    private = [r.get("Private_Dirty", 0) for r in rolls]
    print("density: %d sessions forked in %.1f s, a cell run in each in %.1f s" % (len(sessions), fork_s, cells_s))
    print("  total PSS (sessions and template): %.0f MB; per session: private dirty %.2f MB (median), PSS %.2f MB"
          % (pss / 1024, statistics.median(private) / 1024, statistics.median(r.get("Pss", 0) for r in rolls) / 1024))
    print("  idle CPU of all sessions in 10 s: %.2f s (%.1f ms per session)"
          % (ticks / os.sysconf("SC_CLK_TCK"), ticks / os.sysconf("SC_CLK_TCK") * 1000 / max(1, len(pids))))
    where = smaps(pids[len(pids) // 2])
    print("  one idle session's private dirty memory by mapping (kB):")
    for name, kb in sorted(where.items(), key=lambda kv: -kv[1])[:12]:
        print("    %8d  %s" % (kb, name))
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    stop(km, kc)


def cli_starts(pyc, n, preload):
    """Medians (ms) of `pyc new NAME --from bench` (the template of the pyc-template kernelspec, live) and of
    `pyc new NAME` followed by `pyc run NAME CODE`, each until the command returned."""
    import subprocess

    cli = os.path.join(os.path.dirname(pyc), "pyc")
    out = {"from": [], "cold": []}
    for i in range(n):
        for how in ("from", "cold"):
            name = "b%s%d" % (how, i)
            t0 = time.perf_counter()
            if how == "from":
                subprocess.run([cli, "new", name, "--from", "bench"], check=True, capture_output=True)
            else:
                subprocess.run([cli, "new", name], check=True, capture_output=True)
                subprocess.run([cli, "run", name, preload], check=True, capture_output=True)
            out[how].append((time.perf_counter() - t0) * 1000)
            with open(os.path.join(os.environ["JUPYTER_RUNTIME_DIR"], "pyc-%s.json" % name)) as f:
                PIDS.add(json.load(f)["pid"])
            subprocess.run([cli, "kill", name], capture_output=True)
    return statistics.median(out["from"]), statistics.median(out["cold"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pyc", default=None)
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--density", type=int, default=1000)
    ap.add_argument("--preload", default="import numpy, pandas")
    ap.add_argument("--only", default=",".join(NAMES))
    args = ap.parse_args()
    pyc = bench.find_pyc(args.pyc)
    names = [n for n in NAMES if n in args.only.split(",")]
    with tempfile.TemporaryDirectory(prefix="pyc-bench-tmpl-") as workdir:
        environment(workdir, pyc, args.preload)
        launch_times = timed_launch()
        try:
            if "pyc-template" in names:
                t0 = time.perf_counter()
                km, kc, _, _ = start("pyc-template", args.preload, launch_times)
                print("the template's first start (start, %r, first session): %.0f ms"
                      % (args.preload, (time.perf_counter() - t0) * 1000))
                stop(km, kc)
                del launch_times[:]
            rows = {name: starts(name, args.starts, args.preload, launch_times) for name in names}
            print("medians of %d starts (ms)   start to kernel_info   start + the code   restart   restart(now)"
                  % args.starts)
            for name in names:
                print("%-26s %20.1f %18.1f %9.1f %14.1f" % ((name,) + tuple(rows[name])))
            print("(the code: %r)" % args.preload)
            if launch_times:
                print("pyc-template: the provisioner's launch_kernel (the fork's round trip) %.1f ms of it; "
                      "jupyter_client's own start (the rest) %.1f ms"
                      % (statistics.median(launch_times), rows["pyc-template"][0] - statistics.median(launch_times)))
            for name in names:
                if name != "pyc-template" and "pyc-template" in names:
                    print("ratio %s / pyc-template: start+code %.1f, restart %.1f, restart(now) %.1f"
                          % (name, rows[name][1] / rows["pyc-template"][1], rows[name][2] / rows["pyc-template"][2],
                             rows[name][3] / rows["pyc-template"][3]))
            if "pyc-template" in names:
                km, kc, _, _ = start("pyc-template", args.preload, [])       # the template is live
                from_ms, cold_ms = cli_starts(pyc, args.starts, args.preload)
                stop(km, kc)
                print("pyc new NAME --from TEMPLATE: %.1f ms; pyc new NAME + pyc run NAME %r: %.1f ms (%.1fx)"
                      % (from_ms, args.preload, cold_ms, cold_ms / from_ms))
            if args.density > 0 and "pyc-template" in names:
                density(args.density, args.preload)
        finally:
            for p in PIDS:
                if p:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            from pyc_client import _template
            for t in _template._templates.values():
                try:
                    os.kill(t.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


if __name__ == "__main__":
    main()
