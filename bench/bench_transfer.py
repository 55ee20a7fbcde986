#!/usr/bin/python3
"""bench_transfer.py -- moving a NumPy array between kernels with pyc.pickle. A measurement, not a test.

    /usr/bin/python3 bench/bench_transfer.py [--pyc PATH] [--mb 100] [--repeat 5] [--gb 1] [--gb-repeat 3]
                                             [--no-ipykernel]

Rows (wall time in this process, median of --repeat runs; the array is float64 random data):

  copy    pyc_client.copy(A, "x", B): kernel A pickles x (protocol 5, the data out of band) and, both kernels
          being on this machine, streams it straight to kernel B over a local socket while hashing 4 MiB
          chunks; B hashes the chunks as they land, then checks them against the digests of A's signed
          answer, forwarded by this process in a signed put, and unpickles without a copy.  Ends when B's
          answer is in.
  relay   pyc_client.copy(A, "x", B, direct=False): A publishes the pickle as raw frames with its chunk
          digests; this process forwards the frames unchanged (no copy, no hashing; a buffer over 256 MiB is
          cut into frames of 256 MiB, which B joins) to B, which checks the digests and unpickles on the
          received frames.  What kernels on two machines do.
  get     pyc_client.get(A, "x"): kernel to this process, digests checked here, unpickled here.
  put     pyc_client.put(B, "x", array): this process to a kernel.
  copy 1G the copy row with --gb GiB, median of --gb-repeat runs after one untimed run (pyc only unless
          --ipykernel-gb).

After the runs the SHA-256 of the array in B is compared with the one in A (a mismatch is an error).

ipykernel has no pyc.pickle target, so for comparison the relayed protocol is registered in each ipykernel
with a short cell (IPY_TARGET below: the same pickle, chunk digests hashed by two threads, and buffers, with
the received frames used without a copy as pyc does; without the size limit and the namespace
operations); pyc_client then talks to both kernels alike.  ipykernel has no direct path: both of its copy
rows are the relay.  Kernels run with Jupyter's and IPython's directories in a temporary directory and are
shut down (then killed by pid) at the end.
"""
import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The source tree's client when run from the tree (it matches the tree's kernel), else the installed one.
if os.path.isfile(os.path.join(HERE, "..", "kernel", "python", "pyc_client.py")):
    sys.path.insert(0, os.path.join(HERE, "..", "cli", "python"))
import pyc_client  # noqa: E402

MIB = 1 << 20

IPY_TARGET = r'''
import hashlib as _h, pickle as _p, threading as _t
def _pyc_sha(pieces):
    out, todo, lock = [None] * len(pieces), iter(range(len(pieces))), _t.Lock()
    def work():
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            out[i] = _h.sha256(pieces[i]).hexdigest()
    helper = _t.Thread(target=work)
    helper.start()
    work()
    helper.join()
    return out
def _pyc_digests(bufs, chunk):
    if not chunk:
        return _pyc_sha(bufs)
    per = []
    for b in bufs:
        m = memoryview(b).cast("B")
        per.append([m[i:i + chunk] for i in range(0, m.nbytes, chunk)] or [m])
    flat = iter(_pyc_sha([p for ps in per for p in ps]))
    return [[next(flat) for _ in ps] for ps in per]
def _pyc_pickle_target(comm, msg):
    data, bufs, ns = msg["content"]["data"], msg["buffers"], get_ipython().user_ns
    try:
        if data["op"] == "get":
            obj = ns[data["name"]]
            oob = []
            main = _p.dumps(obj, protocol=5, buffer_callback=lambda pb: oob.append(pb.raw()))
            out = [main] + oob
            reply = {"status": "ok", "op": "get", "name": data["name"], "type": type(obj).__name__,
                     "protocol": 5, "nbytes": sum(memoryview(b).nbytes for b in out),
                     "sha256": _pyc_digests(out, data.get("chunk"))}
            if data.get("chunk"):
                reply["chunk"] = data["chunk"]
            comm.send(reply, buffers=out)
        elif data["op"] == "put":
            if data.get("frames"):      # a buffer over 256 MiB came in several frames (pyc/_digest.py)
                it = iter(bufs)
                bufs = [next(it) if n == 1 else bytearray(b"".join(next(it) for _ in range(n)))
                        for n in data["frames"]]
            if _pyc_digests(bufs, data.get("chunk")) != data["sha256"]:
                raise ValueError("digest mismatch")
            # the received frames are writable memoryviews: the arrays use them without a copy
            ns[data["name"]] = _p.loads(bufs[0], buffers=bufs[1:])
            comm.send({"status": "ok", "op": "put", "name": data["name"]})
        else:
            raise ValueError("unknown op %r" % (data["op"],))
    except Exception as e:
        comm.send({"status": "error", "ename": type(e).__name__, "evalue": str(e)})
    comm.close()
get_ipython().kernel.comm_manager.register_target("pyc.pickle", _pyc_pickle_target)
'''


def find_pyc(given):
    if given is not None:
        return given
    for cand in (os.path.join(HERE, "..", "pyc-kernel"), os.path.join(os.getcwd(), "pyc-kernel")):
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return os.path.normpath(cand)
    return shutil.which("pyc-kernel") or "pyc-kernel"


def setup_env(root, pyc_path):
    for var, sub in (("JUPYTER_PATH", "path"), ("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_CONFIG_DIR", "config"), ("IPYTHONDIR", "ipython")):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
        os.environ[var] = os.path.join(root, sub)
    os.environ.pop("JUPYTER_CONFIG_PATH", None)
    specs = {"bench-pyc": [pyc_path, "-f", "{connection_file}"],
             "bench-ipykernel": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]}
    for name, argv in specs.items():
        d = os.path.join(root, "path", "kernels", name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "kernel.json"), "w") as f:
            json.dump({"argv": argv, "display_name": name, "language": "python"}, f)


class Kernel:
    def __init__(self, spec, log):
        from jupyter_client.manager import KernelManager

        self.km = KernelManager(kernel_name=spec)
        self.log = open(log, "ab")
        self.km.start_kernel(stdout=self.log, stderr=self.log)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def run(self, code, timeout=600):
        out = []
        reply = self.kc.execute_interactive(code, output_hook=out.append, timeout=timeout)
        if reply["content"]["status"] != "ok":
            raise RuntimeError("cell failed: %s: %s" % (reply["content"].get("ename"), reply["content"].get("evalue")))
        text = "".join(m["content"].get("text", "") for m in out if m["msg_type"] == "stream")
        return text

    def close(self):
        pid = getattr(getattr(self.km, "provisioner", None), "pid", None)
        try:
            self.kc.stop_channels()
            self.km.shutdown_kernel(now=False)
        except Exception:
            pass
        proc = getattr(getattr(self.km, "provisioner", None), "process", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
        self.log.close()
        return pid


def timed(fn, n, setup=None):
    """Median and list of the wall times of n calls of fn (setup runs before each, untimed)."""
    times = []
    for _ in range(n):
        if setup is not None:
            setup()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times


def bench_kernel(spec, args, workdir, is_ipy):
    res = {}
    a = Kernel(spec, os.path.join(workdir, spec + "-A.log"))
    b = Kernel(spec, os.path.join(workdir, spec + "-B.log"))
    try:
        for k in (a, b):
            k.run("import numpy as np, hashlib")
            if is_ipy:
                k.run(IPY_TARGET)
        n = args.mb * MIB // 8
        a.run("x = np.random.default_rng(0).random(%d)" % n)
        nbytes = n * 8
        digest_a = a.run("print(hashlib.sha256(x).hexdigest())").strip()

        def clear_b():
            b.run("x = None")

        def copy():
            pyc_client.copy(a.kc, "x", b.kc, timeout=600, direct=not is_ipy)

        def relay():
            pyc_client.copy(a.kc, "x", b.kc, timeout=600, direct=False)

        def check_b(what):
            digest_b = b.run("print(hashlib.sha256(x).hexdigest())").strip()
            if digest_a != digest_b:
                raise RuntimeError("the %s in B differs from A (%s != %s)" % (what, digest_b[:16], digest_a[:16]))
            if b.run("print(x.flags.writeable)").strip() != "True":
                raise RuntimeError("the %s in B is not writable" % what)

        # warm up once (first import of the pickle machinery, page faults of the first big allocations)
        copy()
        res["copy"] = (nbytes,) + timed(copy, args.repeat, clear_b)
        check_b("copy")
        if is_ipy:
            res["relay"] = res["copy"]
        else:
            relay()
            res["relay"] = (nbytes,) + timed(relay, args.repeat, clear_b)
            check_b("relayed copy")

        got = {}

        def get():
            got["x"] = pyc_client.get(a.kc, "x", timeout=600)

        res["get"] = (nbytes,) + timed(get, args.repeat, lambda: got.pop("x", None))
        if hashlib.sha256(got["x"]).hexdigest() != digest_a:
            raise RuntimeError("get returned different bytes")

        def put():
            pyc_client.put(b.kc, "x", got["x"], timeout=600)

        res["put"] = (nbytes,) + timed(put, args.repeat, clear_b)
        got.clear()
        if args.gb and (not is_ipy or args.ipykernel_gb):
            b.run("x = None")
            n = int(args.gb * (1 << 30)) // 8
            a.run("x = np.random.default_rng(1).random(%d)" % n)
            digest_a = a.run("print(hashlib.sha256(x).hexdigest())").strip()
            copy()               # warm up, as above: the first touch of a fresh GiB costs seconds on a VM
            res["copy_gb"] = (n * 8,) + timed(copy, args.gb_repeat, clear_b)
            digest_b = b.run("print(hashlib.sha256(x).hexdigest())").strip()
            if digest_a != digest_b:
                raise RuntimeError("the 1 GB copy in B differs from A")
    finally:
        a.close()
        b.close()
    return res


def fmt(cell):
    if cell is None:
        return "-"
    if isinstance(cell, str):
        return cell
    nbytes, med, _ = cell
    return "%8.0f ms %6.2f GB/s" % (med * 1000, nbytes / med / 1e9)


def main():
    ap = argparse.ArgumentParser(description="pyc.pickle transfer benchmark")
    ap.add_argument("--pyc", default=None, help="path of pyc-kernel (default: the tree's, then PATH)")
    ap.add_argument("--mb", type=int, default=100, help="size of the array in MiB (default 100)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per row, the median is shown (default 5)")
    ap.add_argument("--gb", type=float, default=1.0, help="size in GiB of the big copy (0: leave it out)")
    ap.add_argument("--gb-repeat", type=int, default=3, help="runs of the big copy (default 3)")
    ap.add_argument("--no-ipykernel", action="store_true", help="leave ipykernel out")
    ap.add_argument("--ipykernel-gb", action="store_true", help="also run the big copy with ipykernel")
    ap.add_argument("--json", default=None, help="write the results there")
    args = ap.parse_args()

    pyc_path = find_pyc(args.pyc)
    workdir = tempfile.mkdtemp(prefix="pyc-bench-transfer-")
    setup_env(workdir, os.path.abspath(pyc_path) if os.path.sep in pyc_path else pyc_path)
    results, errors = {}, {}
    kernels = [("pyc", "bench-pyc", False)]
    if not args.no_ipykernel:
        kernels.append(("ipykernel", "bench-ipykernel", True))
    for label, spec, is_ipy in kernels:
        try:
            results[label] = bench_kernel(spec, args, workdir, is_ipy)
        except Exception as e:
            errors[label] = "%s: %s" % (type(e).__name__, e)
            results[label] = {}

    rows = [("copy", "copy A->B %d MiB" % args.mb), ("relay", "copy relayed %d MiB" % args.mb),
            ("get", "get kernel->client %d MiB" % args.mb),
            ("put", "put client->kernel %d MiB" % args.mb)]
    if args.gb:
        rows.append(("copy_gb", "copy A->B %g GiB" % args.gb))
    labels = [lbl for lbl, _, _ in kernels]
    print()
    print("pyc.pickle transfers (wall time in the client, median; float64 random data)")
    head = "%-26s" % "row" + "".join("%-26s" % lbl for lbl in labels) + ("pyc/ipykernel" if len(labels) > 1 else "")
    print(head)
    print("-" * len(head))
    for key, title in rows:
        cells = [results[lbl].get(key) if lbl not in errors else "ERROR" for lbl in labels]
        line = "%-26s" % title + "".join("%-26s" % fmt(c) for c in cells)
        if len(labels) > 1 and all(isinstance(c, tuple) for c in cells):
            line += "%.2fx time" % (cells[0][1] / cells[1][1])
        print(line)
    for lbl, e in errors.items():
        print("ERROR [%s] %s" % (lbl, e))
    print("runs: %s" % "; ".join("%s %s: %s" % (lbl, k, ", ".join("%.0f" % (t * 1000) for t in v[2]))
                                  for lbl in labels for k, v in results[lbl].items()) + " (ms)")
    print("pyc-kernel: %s; logs in %s" % (pyc_path, workdir))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({lbl: {k: {"bytes": v[0], "median_s": v[1], "runs_s": v[2]} for k, v in r.items()}
                       for lbl, r in results.items()}, f, indent=1)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
