#!/usr/bin/env python3
"""A kernel through jupyter_server's websocket, as agent frameworks drive it (a benchmark, not a test): pyc and
ipykernel side by side in one run.

    /usr/bin/python3 bench/bench_server.py [--kernel build/pyc-kernel] [--blocks 40] [--quick]

One `jupyter server` on 127.0.0.1 (isolated Jupyter dirs in a temp folder) with two kernelspecs, pyc and
ipykernel; for each a kernel is made by REST and driven over one websocket, block after block, each block an
execute_request whose output is a print, a display and a result (OpenHands' and E2B's executors send such
blocks).  For each block, timed from the send: the execute_reply and the idle status as the websocket gives
them.  Also counted: the blocks in which an output of the block came after its execute_reply, which a client
that ends a block at the reply (OpenHands does) loses.  jupyter_server reads iopub and shell on two ZeroMQ
streams and takes one message from a stream per turn of its loop, so a reply that reaches it together with
the block's outputs is often forwarded first; see README "Agent frameworks" for what pyc does about it
(PYC_REPLY_PACE_US in this script's environment reaches the pyc kernel: 0 shows pyc without it).

Prints, per kernel, the medians and p90s and the lost-output count, and the ratios.  The server and the
kernels are ended by pid at the end.
"""

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

CODE = "print('block', {n})\ndisplay({{'text/html': '<b>{n}</b>', 'text/plain': '{n}'}}, raw=True)\n{n} * 2"
OUTPUTS = ("stream", "display_data", "execute_result", "error", "execute_input")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(base, token, path, method="GET", body=None, timeout=30):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Authorization": "token " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        text = r.read().decode()
    return json.loads(text) if text else None


def write_spec(root, name, argv):
    d = os.path.join(root, "kernels", name)
    os.makedirs(d)
    with open(os.path.join(d, "kernel.json"), "w") as f:
        json.dump({"argv": argv, "display_name": name, "language": "python"}, f)


async def drive(base, token, kernel_id, blocks):
    """Runs the blocks over one websocket; returns (reply_ms, idle_ms, lost)."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    session = uuid.uuid4().hex
    url = base.replace("http", "ws") + "/api/kernels/%s/channels?session_id=%s" % (kernel_id, session)
    ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": "token " + token}))
    # Without it each small frame we send waits for the server's delayed ACK (40 ms), which would hide the
    # kernels' own times.
    ws.protocol.stream.set_nodelay(True)
    sock = ws.protocol.stream.socket
    reply_ms, idle_ms, lost = [], [], 0
    try:
        for n in range(blocks + 3):           # the first three warm the path up and are not counted
            msg_id = uuid.uuid4().hex
            msg = {"header": {"msg_id": msg_id, "msg_type": "execute_request", "session": session,
                              "username": "bench", "date": "", "version": "5.3"},
                   "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                   "content": {"code": CODE.format(n=n), "silent": False, "store_history": True,
                               "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}
            t0 = time.perf_counter()
            await ws.write_message(json.dumps(msg))
            t_reply = t_idle = None
            after_reply = False
            while t_reply is None or t_idle is None:
                # The server writes its frames without TCP_NODELAY: each small frame behind an unacknowledged one
                # waits for our ACK, which Linux delays by 40 ms unless asked to ACK at once (again after each
                # read: quick-ACK mode does not stay on).
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
                raw = await asyncio.wait_for(ws.read_message(), 30)
                if raw is None:
                    raise RuntimeError("the websocket closed")
                m = json.loads(raw)
                if m.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                t = (time.perf_counter() - t0) * 1000
                kind = m["header"]["msg_type"]
                if kind == "execute_reply":
                    t_reply = t
                elif kind == "status" and m["content"]["execution_state"] == "idle":
                    t_idle = t
                elif kind in OUTPUTS and t_reply is not None:
                    after_reply = True
            if n >= 3:
                reply_ms.append(t_reply)
                idle_ms.append(t_idle)
                lost += after_reply
    finally:
        ws.close()
    return reply_ms, idle_ms, lost


def row(label, ms):
    q = statistics.quantiles(ms, n=10) if len(ms) >= 10 else [min(ms)] * 9
    return "%-34s median %7.2f ms   p90 %7.2f ms" % (label, statistics.median(ms), q[8])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernel", default=os.path.join(here, "..", "build", "pyc-kernel"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--blocks", type=int, default=40)
    ap.add_argument("--quick", action="store_true", help="20 blocks")
    ap.add_argument("--only", choices=("pyc", "ipykernel"))
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args()
    blocks = 20 if args.quick else args.blocks
    kernel = os.path.abspath(args.kernel)
    if not os.access(kernel, os.X_OK):
        sys.exit("bench_server: %s is not an executable (build first, or give --kernel)" % kernel)

    tmp = tempfile.mkdtemp(prefix="pyc-bench-server-")
    env = dict(os.environ)
    for var, sub in (("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_PATH", "path"),
                     ("JUPYTER_CONFIG_DIR", "config"), ("IPYTHONDIR", "ipython"), ("HOME", "home")):
        env[var] = os.path.join(tmp, sub)
        os.makedirs(env[var])
    env["PYC_HISTORY_FILE"] = ":memory:"
    env.pop("JPY_PARENT_PID", None)
    write_spec(env["JUPYTER_PATH"], "pyc", [kernel, "-f", "{connection_file}"])
    write_spec(env["JUPYTER_PATH"], "ipyref", [args.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    port, token = free_port(), secrets.token_hex(16)
    base = "http://127.0.0.1:%d" % port
    log = open(os.path.join(tmp, "server.log"), "wb")
    server = subprocess.Popen([args.python, "-m", "jupyter_server", "--no-browser", "--allow-root",
                               "--ip=127.0.0.1", "--port=%d" % port, "--ServerApp.port_retries=0",
                               "--ServerApp.token=%s" % token, "--ServerApp.password=",
                               "--ServerApp.root_dir=%s" % tmp],
                              env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    results = {}
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                api(base, token, "/api/kernelspecs", timeout=2)
                break
            except Exception:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the server did not start; see %s" % log.name)
                time.sleep(0.1)
        names = {"pyc": "pyc", "ipykernel": "ipyref"}
        for label in ("pyc", "ipykernel"):
            if args.only and label != args.only:
                continue
            k = api(base, token, "/api/kernels", "POST", {"name": names[label]})
            try:
                reply_ms, idle_ms, lost = asyncio.run(drive(base, token, k["id"], blocks))
            finally:
                api(base, token, "/api/kernels/%s" % k["id"], "DELETE")
            results[label] = {"reply_ms": reply_ms, "idle_ms": idle_ms, "lost": lost, "blocks": blocks}
            print("%s through jupyter_server's websocket (%d blocks):" % (label, blocks))
            print(row("  request to execute_reply", reply_ms))
            print(row("  request to idle", idle_ms))
            print("  blocks with output after the reply: %d of %d" % (lost, blocks))
        if len(results) == 2:
            for what in ("reply_ms", "idle_ms"):
                print("%-34s %6.1fx" % ("ratio %s (ipykernel / pyc)" % what.replace("_ms", ""),
                                        statistics.median(results["ipykernel"][what]) /
                                        statistics.median(results["pyc"][what])))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
