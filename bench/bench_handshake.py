#!/usr/bin/python3
"""bench_handshake.py -- kernels started with and without the protocol 5.6 handshake. A measurement, not a test.

    /usr/bin/python3 bench/bench_handshake.py [--pyc PATH] [--kernels 40] [--starts 10] [--no-grabber]

Two ways to start pyc-kernel through jupyter_client's KernelManager, side by side in one run:
  classic    jupyter_client picks five free ports, releases them, writes a connection file (its TODO, "change
             when handshake pattern is adopted"), and the kernel binds them later;
  handshake  pyc_client's provisioner binds one registration socket, the kernel binds ports of its own and
             reports them (pyc-handshake kernelspec).
For each it prints:
  1) a start storm: --kernels kernels started at once (one thread each), while a helper process keeps taking
     free ephemeral ports (binds port 0 and holds each port for 50 ms, as busy hosts do); counted: starts that
     failed (the kernel exited, or no kernel_info within 30 s), and port collisions (a kernel that could not
     bind a port it was given because another process had it: "Address already in use" in its log; and ports
     given to two kernels);
  2) the start time of one kernel alone, start_kernel to kernel_info_reply, median of --starts.
Everything runs in a temporary Jupyter environment; every kernel is ended by its pid.
"""
import argparse
import json
import multiprocessing
import os
import socket
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402

PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def grabber(stop):
    """Takes free ephemeral ports as fast as it can, holding each for 50 ms."""
    held = []
    while not stop.is_set():
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
        except OSError:
            s.close()
            continue
        held.append((time.monotonic(), s))
        now = time.monotonic()
        while held and now - held[0][0] > 0.05:
            held.pop(0)[1].close()
    for _, s in held:
        s.close()


def environment(workdir, pyc):
    env = {}
    for var, sub in (("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_PATH", "path"),
                     ("JUPYTER_CONFIG_DIR", "config"), ("IPYTHONDIR", "ipython"), ("HOME", "home")):
        env[var] = os.path.join(workdir, sub)
        os.makedirs(env[var], exist_ok=True)
    os.environ.update(env)
    os.environ.pop("JUPYTER_CONFIG_PATH", None)
    for name, meta in (("pyc", {}), ("pyc-handshake", {"kernel_provisioner": {
            "provisioner_name": "pyc-handshake-provisioner", "config": {}}})):
        kdir = os.path.join(env["JUPYTER_PATH"], "kernels", name)
        os.makedirs(kdir, exist_ok=True)
        with open(os.path.join(kdir, "kernel.json"), "w") as f:
            json.dump({"argv": [pyc, "-f", "{connection_file}"], "display_name": name, "language": "python",
                       "metadata": meta}, f)
    sys.path[:0] = [os.path.join(HERE, "..", "cli", "python"), os.path.join(workdir, "site")]
    from pyc_client._provisioner import write_dist_info
    write_dist_info(os.path.join(workdir, "site"))


def start_one(name, results, i, log_path):
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name=name)
    t0 = time.monotonic()
    entry = {"ok": False, "ports": [], "pid": None, "log": log_path}
    results[i] = entry
    log = open(log_path, "wb")
    try:
        km.start_kernel(stdout=log, stderr=log)
        entry["pid"] = km.provisioner.process.pid
        entry["ports"] = [km.get_connection_info()[p] for p in PORTS]
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=30)
            entry["ok"] = True
        finally:
            kc.stop_channels()
        entry["ms"] = (time.monotonic() - t0) * 1000
    except Exception as e:  # noqa: BLE001 -- a failed start is what is counted
        entry["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        entry["km"] = km
        log.close()


def end_all(results):
    for entry in results:
        if entry is None:
            continue
        km = entry.get("km")
        try:
            if km is not None and km.has_kernel:
                km.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001
            pass
        if entry.get("pid"):
            try:
                os.kill(entry["pid"], 9)
            except ProcessLookupError:
                pass


def storm(name, n, with_grabber, workdir):
    stop = multiprocessing.Event()
    g = multiprocessing.Process(target=grabber, args=(stop,)) if with_grabber else None
    if g is not None:
        g.start()
        time.sleep(0.5)
    results = [None] * n
    logs = [os.path.join(workdir, "%s-%d.log" % (name, i)) for i in range(n)]
    threads = [threading.Thread(target=start_one, args=(name, results, i, logs[i])) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if g is not None:
        stop.set()
        g.join()
    failures = [r for r in results if not r["ok"]]
    ports = [p for r in results if r["ok"] for p in r["ports"]]
    taken = sum(1 for r in results if "Address already in use" in open(r["log"], errors="replace").read())
    collisions = taken + (len(ports) - len(set(ports)))
    end_all(results)
    return len(failures), collisions, [r.get("error", "")[:120] for r in failures][:3]


def single(name, n):
    times = []
    for _ in range(n):
        results = [None]
        start_one(name, results, 0, os.devnull)
        if results[0]["ok"]:
            times.append(results[0]["ms"])
        end_all(results)
    return statistics.median(times) if times else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pyc", default=None)
    ap.add_argument("--kernels", type=int, default=40)
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--no-grabber", action="store_true")
    args = ap.parse_args()
    pyc = bench.find_pyc(args.pyc)
    with tempfile.TemporaryDirectory(prefix="pyc-bench-hs-") as workdir:
        environment(workdir, pyc)
        print("start storm: %d kernels at once%s" % (args.kernels, "" if args.no_grabber else
                                                     ", a helper taking free ports meanwhile"))
        rows = {}
        for name in ("pyc", "pyc-handshake"):
            rows[name] = storm(name, args.kernels, not args.no_grabber, workdir)
        single_ms = {name: single(name, args.starts) for name in ("pyc", "pyc-handshake")}
        label = {"pyc": "classic", "pyc-handshake": "handshake"}
        print("%-10s %9s %11s %16s" % ("", "failures", "collisions", "one start (ms)"))
        for name in ("pyc", "pyc-handshake"):
            fails, coll, errors = rows[name]
            print("%-10s %9d %11d %16.1f" % (label[name], fails, coll, single_ms[name]))
            for e in errors:
                print("           e.g. %s" % e)
        print("ratio of one start, handshake / classic: %.2f" % (single_ms["pyc-handshake"] / single_ms["pyc"]))


if __name__ == "__main__":
    main()
