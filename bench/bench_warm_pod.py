#!/usr/bin/env python3
"""Warm-pod benchmark (issue 16; a benchmark, not a test): how soon an agent's task gets a session holding
the warmed state, three ways, in one run, all started the way a gateway starts kernels in pods:

  fork      one pyc kernel started by `pyc-kernel gateway-launch` (bound to 0.0.0.0, as in a pod) and warmed
            once; each task is a session forked from it with pyc_client.fork.  Timed from the fork request to
            the task cell's reply in the child.
  new pyc   each task starts a new pyc kernel with `pyc-kernel gateway-launch`, which must warm itself.  Timed
            from the launcher's spawn to the task cell's reply: payload at the gateway, client ready, warm-up
            cell, task cell.
  ipykernel the same with ipykernel, through pyc's generic launcher
            (`pyc-kernel gateway-launch ... -- /usr/bin/python3 -m ipykernel_launcher -f {connection_file}`).

The gateway is tests/gateway/fakegateway.py (RSA/AES payload decoded as Enterprise Gateway and
gateway_provisioners decode it).  The warm-up is --warm (default: import numpy and pandas and make a frame),
the task cell reads the warmed state.  Also printed: each session's own memory (USS: its private pages), since
a forked task shares the parent's pages.  Ratios are new/fork.  Every process started is ended by pid.

    /usr/bin/python3 bench/bench_warm_pod.py [--tasks 10] [--no-ipykernel] [--warm CODE --task CODE]
"""

import argparse
import os
import shutil
import statistics
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_fork import uss_mb  # noqa: E402  (a session's own memory: its private pages)

WARM = ("import numpy as np, pandas as pd, json, decimal\n"
        "frame = pd.DataFrame({'a': np.arange(100000), 'b': np.random.default_rng(0).random(100000)})\n")
TASK = "frame['a'].sum() + len(json.dumps({'x': 1}))"


def client(info, timeout=60):
    """A client of a new kernel, returned once its iopub subscription is in place: the kernel's iopub_welcome
    (JEP 65; pyc sends it) or the iopub status of a kernel_info_request, sent every 20 ms until one is seen
    (ipykernel 6 sends no welcome).  The same for every kernel, and the way pyc_client.fork waits for a child:
    jupyter_client's wait_for_ready would add 200 ms of iopub draining to each new kernel."""
    from queue import Empty

    from jupyter_client import BlockingKernelClient

    ci = dict(info)
    ci["ip"] = "127.0.0.1"
    kc = BlockingKernelClient()
    kc.load_connection_info(ci)
    kc.start_channels(hb=False)
    deadline, probes = time.monotonic() + timeout, {kc.kernel_info()}
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.02)
        except Empty:
            probes.add(kc.kernel_info())
            continue
        if msg["msg_type"] == "iopub_welcome" or msg["parent_header"].get("msg_id") in probes:
            return kc
    kc.stop_channels()
    raise SystemExit("a new kernel's iopub did not answer within %s s" % timeout)


def run_ok(kc, code, timeout=120):
    import pyctest

    reply, msgs = pyctest.execute(kc, code, timeout=timeout)
    if reply["content"]["status"] != "ok":
        raise SystemExit("a cell failed: %s: %s" % (reply["content"].get("ename"), reply["content"].get("evalue")))
    return msgs


def launch(fg, gateway, base, args, extra=()):
    """A launcher of a new kernel and the kernel's decoded connection info."""
    kid = str(uuid.uuid4())
    d = os.path.join(base, "l-" + kid[:8])
    os.makedirs(d)
    launcher = fg.Launcher(["--kernel-id", kid, "--response-address", gateway.response_address,
                            "--public-key", gateway.public_key] + list(args) + list(extra), d)
    delivery = gateway.wait_delivery(60, launcher)
    if delivery is None or delivery.error is not None or not isinstance(delivery.info, dict):
        raise SystemExit("no usable payload:%s" % launcher.describe())
    launcher.adopt_kernel(delivery.info.get("pid"))
    return launcher, delivery.info


def new_kernel_task(fg, gateway, base, extra, warm, task):
    """One task on a new kernel: (ms from spawn to the task's reply, the kernel's USS in MB)."""
    t0 = time.perf_counter()
    launcher, info = launch(fg, gateway, base, ["--ip", "127.0.0.1"], extra)
    kc = client(info)
    try:
        run_ok(kc, warm)
        run_ok(kc, task)
        took = (time.perf_counter() - t0) * 1000
        return took, uss_mb(info["pid"])
    finally:
        kc.stop_channels()
        launcher.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pyc", default=os.path.join(TOP, "build", "pyc-kernel"))
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--no-ipykernel", action="store_true")
    ap.add_argument("--warm", default=WARM, help="the warm-up cell (default: numpy, pandas, a 100,000-row frame)")
    ap.add_argument("--task", default=TASK, help="the task's cell, which reads the warmed state")
    args = ap.parse_args()

    os.environ["PYC_KERNEL"] = os.path.abspath(args.pyc)
    sys.path[:0] = [os.path.join(TOP, "tests"), os.path.join(TOP, "tests", "gateway"),
                    os.path.join(TOP, "cli", "python")]
    import pyctest

    root = pyctest.setup_environment()
    import fakegateway as fg
    import pyc_client

    gateway = fg.FakeGateway()
    base = os.path.join(root, "bench")
    os.makedirs(base)
    rows = {}
    try:
        # fork: one warm parent, a session per task
        launcher, info = launch(fg, gateway, base, [])
        parent = fg.kernel_client(info, "127.0.0.1", timeout=60)
        t0 = time.perf_counter()
        run_ok(parent, args.warm)
        warm_ms = (time.perf_counter() - t0) * 1000
        took, uss = [], []
        task = args.task
        for _ in range(args.tasks):
            t0 = time.perf_counter()
            [kc] = pyc_client.fork(parent, 1, timeout=60)
            pid = pyctest.register_pid(kc.pyc_child["pid"])
            try:
                run_ok(kc, task)
                took.append((time.perf_counter() - t0) * 1000)
                uss.append(uss_mb(pid))
            finally:
                kc.stop_channels()
                pyctest.kill_pid(pid)
        rows["fork"] = (took, uss)
        parent.stop_channels()
        launcher.stop()

        kinds = [("new pyc", ())]
        if not args.no_ipykernel:
            kinds.append(("ipykernel", ("--", "/usr/bin/python3", "-m", "ipykernel_launcher", "-f",
                                        "{connection_file}")))
        for name, extra in kinds:
            took, uss = [], []
            for _ in range(args.tasks):
                t, u = new_kernel_task(fg, gateway, base, extra, args.warm, args.task)
                took.append(t)
                uss.append(u)
            rows[name] = (took, uss)
    finally:
        gateway.close()
        for pid in pyctest.STARTED_PIDS:
            pyctest.kill_pid(pid)
        shutil.rmtree(root, ignore_errors=True)

    fork_ms = statistics.median(rows["fork"][0])
    print("warm pods, %d tasks each; the warm-up cell took %.0f ms in the parent" % (args.tasks, warm_ms))
    print("%-10s %14s %14s %14s %12s" % ("", "task ready p50", "min", "max", "own MB (USS)"))
    for name, (took, uss) in rows.items():
        print("%-10s %11.1f ms %11.1f ms %11.1f ms %12.1f" % (name, statistics.median(took), min(took), max(took),
                                                            statistics.median(uss)))
    for name in rows:
        if name != "fork":
            print("%s / fork: %.1fx the time to a ready task, %.1fx the memory of its own"
                  % (name, statistics.median(rows[name][0]) / fork_ms,
                     statistics.median(rows[name][1]) / statistics.median(rows["fork"][1])))


if __name__ == "__main__":
    main()
