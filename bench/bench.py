#!/usr/bin/python3
"""bench.py -- side-by-side benchmark of pyc-kernel against ipykernel. A measurement, not a test.

    /usr/bin/python3 bench/bench.py [--pyc PATH] [--only pyc|ipykernel] [--quick] [--json FILE]

Both kernels are started in the same run and measured in alternation (pyc first on even rounds, ipykernel
first on odd ones) so that drift in machine load falls on both alike. For each kernel it prints:

  1) cold start: from just before the process is spawned to the first kernel_info_reply received, median of
     N starts. The client's sockets are connected before the spawn (with a 1 ms reconnect interval) and the
     request is already queued, so neither client imports nor socket setup are counted.
  2) RSS after start: VmRSS from /proc/PID/status once kernel_info and a `pass` cell have completed, median
     over the same starts.
  3) `pass` round trip: execute_request of "pass" until both its execute_reply and its idle status have
     arrived, p50 and p99 over many requests, run in alternating blocks.
  4) pipelined execute: N `pass` requests sent without waiting, then every execute_reply and every idle
     status collected; requests per second.
  5) stdout throughput: one cell writes 200 MB (20 with --quick) in 1 MB writes; stream text bytes received
     divided by the time from request to idle. The byte count must come out exact or the row is an error.

The client is pyzmq plus jupyter_client.session.Session, with no threads. Requests are built and signed
before the clock starts, replies are not signature-checked and are parsed only as far as the measurement
needs (stream text is counted without a JSON decode when it has no escapes), so the client costs the same
for both kernels: on a 2-CPU VM about 9 us of CPU per request sent and 10 us per message received, which
puts its own ceiling near 20,000 pipelined req/s and 3 GB/s of stdout, twice pyc's targets. A throughput
row in which the client was on CPU 70% of the time or more is flagged as possibly measuring the client.
Jupyter's and IPython's directories point into a temporary directory. Every kernel started is ended by its pid
(shutdown_request, then SIGKILL after a grace period), also on Ctrl-C, SIGTERM or an exception.

A kernel that fails (not found, crashes, times out, wrong byte count) gets the error in its row, and the
run goes on with the next measurement, restarting the kernel if it died. --pyc '' or --only ipykernel
leave pyc out. --quick cuts the counts so that a run with both kernels takes under 30 s.
"""
import argparse
import atexit
import json
import os
import platform
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import zmq
from jupyter_client.connect import write_connection_file
from jupyter_client.session import Session

MIB = 1048576
DELIM = b"<IDS|MSG>"
RCVMORE, SNDMORE, NOBLOCK = int(zmq.RCVMORE), int(zmq.SNDMORE), int(zmq.NOBLOCK)
CLIENT_BOUND = 0.7      # a throughput run in which the client was on CPU this much of the time is flagged

# pyc's goals, with the direction in which a number meets them.
TARGETS = {
    "start_ms": ("<=", 45.0),
    "rss_mb": ("<=", 15.0),
    "pass_p50_ms": ("<=", 0.4),
    "pipelined_rps": (">=", 10000.0),
    "stdout_mbps": (">=", 1000.0),
}

FULL = dict(starts=10, passes=2000, pipelined=10000, stdout_mb=200)
QUICK = dict(starts=3, passes=300, pipelined=1000, stdout_mb=20)

LIVE = {}   # pid -> Popen of every kernel not yet known to be dead; atexit and finally kill what is left


class BenchError(Exception):
    pass


def now():
    return time.perf_counter_ns()


def kill_all():
    """Kills every kernel still registered, by pid. Safe to call more than once."""
    for pid, proc in list(LIVE.items()):
        if proc.poll() is None:
            try:
                proc.kill()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        LIVE.pop(pid, None)


def on_signal(signum, frame):
    raise SystemExit(128 + signum)


# pyzmq's send_multipart/recv_multipart cost 15-20 us a message here (option enums, Frame objects); these
# loops over the Cython send/recv cost about 5, which keeps the client far from the pipelined target.

def send_frames(sock, frames):
    send = sock.send
    for f in frames[:-1]:
        send(f, SNDMORE)
    send(frames[-1])


def recv_frames(sock, flags=0):
    """One whole message; with NOBLOCK raises zmq.Again when none is queued."""
    recv, more = sock.recv, sock.get
    out = [recv(flags)]
    while more(RCVMORE):
        out.append(recv())
    return out


# ---- one kernel process and the lean client that talks to it ---------------------------------------------

class Kernel:
    """A started kernel process plus its client sockets (shell, control: DEALER; iopub: SUB)."""

    def __init__(self, name, argv_for, workdir, env, grace, start_timeout):
        self.name = name
        self.argv_for = argv_for
        self.workdir = workdir
        self.env = env
        self.grace = grace
        self.start_timeout = start_timeout
        self.broken = None      # set when a restart failed: later measurements report it without retrying
        self.proc = None
        self.ctx = zmq.Context.instance()
        self.socks = []
        self.seq = 0

    # -- lifecycle --

    def spawn_and_wait_info(self):
        """Starts the process and returns ns from spawn to the first kernel_info_reply."""
        timeout = self.start_timeout
        self.seq += 1
        self.connfile = os.path.join(self.workdir, "kernel-%s-%d-%d.json" % (self.name, os.getpid(), self.seq))
        key = secrets.token_hex(16).encode()
        _, cfg = write_connection_file(self.connfile, ip="127.0.0.1", key=key, transport="tcp",
                                       signature_scheme="hmac-sha256")
        self.session = Session(key=key, signature_scheme="hmac-sha256", username="bench")
        self.shell = self._sock(zmq.DEALER, cfg["shell_port"])
        self.control = self._sock(zmq.DEALER, cfg["control_port"])
        self.iopub = self._sock(zmq.SUB, cfg["iopub_port"])
        self.iopub.setsockopt(zmq.SUBSCRIBE, b"")
        self.poller = zmq.Poller()
        self.poller.register(self.shell, zmq.POLLIN)
        self.poller.register(self.iopub, zmq.POLLIN)
        self.log = open(os.path.join(self.workdir, "%s-%d.log" % (self.name, self.seq)), "wb")
        info_id, info = self.build("kernel_info_request", {})

        t0 = now()
        self.proc = subprocess.Popen(self.argv_for(self.connfile), env=self.env, cwd=self.workdir,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        LIVE[self.proc.pid] = self.proc
        send_frames(self.shell, info)
        deadline = t0 + int(timeout * 1e9)
        while True:
            if self.shell.poll(5, zmq.POLLIN):
                header, parent, _ = self.recv(self.shell)
                if parent.get("msg_id") == info_id:
                    return now() - t0
            elif self.proc.poll() is not None:
                raise BenchError("exited with status %s before replying%s" % (self.proc.returncode, self.tail()))
            if now() > deadline:
                raise BenchError("no kernel_info_reply within %.0f s%s" % (timeout, self.tail()))

    def wait_iopub(self, timeout=20.0):
        """Resends kernel_info until a status message shows that the iopub subscription is live."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.send("kernel_info_request", {})
            end = time.monotonic() + 0.2
            while time.monotonic() < end:
                if self.iopub.poll(20, zmq.POLLIN):
                    header, _, _ = self.recv(self.iopub)
                    if header.get("msg_type") == "status":
                        self.drain(0.05)
                        return
                self.check_alive()
        raise BenchError("iopub gave no status message within %.0f s" % timeout)

    def start(self):
        """Starts a kernel that is ready for the steady-state measurements (not timed)."""
        self.spawn_and_wait_info()
        self.wait_iopub()
        self.execute("pass")

    def stop(self):
        """Asks the kernel to shut down, waits for the grace period, then kills it by pid."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                self.send("shutdown_request", {"restart": False}, sock=self.control)
                proc.wait(timeout=self.grace)
            except (zmq.ZMQError, subprocess.TimeoutExpired):
                pass
            if proc.poll() is None:
                proc.kill()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        if proc is not None:
            LIVE.pop(proc.pid, None)
        for s in self.socks:
            s.close(linger=0)
        self.socks = []
        if getattr(self, "log", None):
            self.log.close()
            self.log = None
        if getattr(self, "connfile", None) and os.path.exists(self.connfile):
            os.unlink(self.connfile)
        self.proc = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self):
        if not self.alive():
            code = self.proc.returncode if self.proc else None
            raise BenchError("kernel exited (status %s)%s" % (code, self.tail()))

    def tail(self):
        """The last line of the kernel's output, for error messages."""
        try:
            self.log.flush()
            with open(self.log.name, "rb") as f:
                lines = [l for l in f.read()[-4000:].decode("utf-8", "replace").splitlines() if l.strip()]
            return (": " + lines[-1].strip()[:200]) if lines else ""
        except (OSError, AttributeError, ValueError):
            return ""

    def rss_mb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        raise BenchError("no VmRSS in /proc/%d/status" % self.proc.pid)

    # -- messages --

    def _sock(self, kind, port):
        s = self.ctx.socket(kind)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.SNDHWM, 0)           # never block a pipelined send
        s.setsockopt(zmq.RCVHWM, 0)           # never make the kernel drop a reply or a stream chunk
        s.setsockopt(zmq.RECONNECT_IVL, 1)    # the kernel is not listening yet at connect time
        s.setsockopt(zmq.RECONNECT_IVL_MAX, 1)
        s.connect("tcp://127.0.0.1:%d" % port)
        self.socks.append(s)
        return s

    def build(self, msg_type, content):
        """Returns (msg_id, signed frames) for a request, ready for send_frames."""
        msg = self.session.msg(msg_type, content)
        return msg["header"]["msg_id"], self.session.serialize(msg)

    def build_execute(self, code):
        return self.build("execute_request", {"code": code, "silent": False, "store_history": True,
                                              "user_expressions": {}, "allow_stdin": False,
                                              "stop_on_error": True})

    def send(self, msg_type, content, sock=None):
        msg_id, frames = self.build(msg_type, content)
        send_frames(sock or self.shell, frames)
        return msg_id

    @staticmethod
    def split(frames):
        """Returns (header bytes, parent bytes, content bytes) of a received message, signature unchecked."""
        try:
            i = frames.index(DELIM)
            return frames[i + 2], frames[i + 3], frames[i + 5]
        except (ValueError, IndexError):
            raise BenchError("malformed message of %d frames" % len(frames))

    def recv(self, sock):
        h, p, c = self.split(recv_frames(sock))
        return json.loads(h), json.loads(p), c

    def drain(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for sock, _ in self.poller.poll(10):
                recv_frames(sock)

    def execute(self, code, timeout=60.0):
        """Runs one cell and waits for its reply and idle status; raises on an error reply."""
        msg_id, frames = self.build_execute(code)
        send_frames(self.shell, frames)
        self.wait_reply_idle(msg_id, timeout)

    def wait_reply_idle(self, msg_id, timeout):
        got_reply = got_idle = False
        deadline = time.monotonic() + timeout
        while not (got_reply and got_idle):
            events = self.poller.poll(1000)
            if not events:
                self.check_alive()
                if time.monotonic() > deadline:
                    raise BenchError("no reply and idle within %.0f s" % timeout)
            for sock, _ in events:
                header, parent, content = self.recv(sock)
                if parent.get("msg_id") != msg_id:
                    continue
                if sock is self.shell:
                    status = json.loads(content).get("status")
                    if status != "ok":
                        raise BenchError("execute_reply status %r" % status)
                    got_reply = True
                elif header.get("msg_type") == "status" and b"idle" in content:
                    got_idle = True


# ---- the measurements --------------------------------------------------------------------------------------

def cold_start(k):
    """One cold start: returns (ms to first kernel_info_reply, RSS in MB after a `pass` cell)."""
    try:
        ns = k.spawn_and_wait_info()
        k.wait_iopub()
        k.execute("pass")
        return ns / 1e6, k.rss_mb()
    finally:
        k.stop()


def pass_latency(k, n):
    """n `pass` round trips to reply-and-idle; returns the list of times in ms."""
    msgs = [k.build_execute("pass") for _ in range(n)]
    out = []
    shell, poller, split = k.shell, k.poller, k.split
    for msg_id, frames in msgs:
        mid = b'"' + msg_id.encode() + b'"'    # quoted: id _1 is a prefix of id _10
        got_reply = got_idle = False
        t0 = now()
        send_frames(shell, frames)
        while not (got_reply and got_idle):
            events = poller.poll(10000)
            if not events:
                k.check_alive()
                raise BenchError("no reply and idle within 10 s")
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
                        if b'"ok"' not in c:
                            raise BenchError("execute_reply not ok: %s" % c[:200].decode("utf-8", "replace"))
                        got_reply = True
                    elif b'"status"' in h and b'"idle"' in c:
                        got_idle = True
        out.append((now() - t0) / 1e6)
    return out


def pipelined(k, n, timeout=300.0):
    """Sends n `pass` requests back to back, collects n replies and n idles.

    Returns (requests/s, the fraction of the time the client was on CPU)."""
    msgs = [k.build_execute("pass")[1] for _ in range(n)]
    shell, poller, split = k.shell, k.poller, k.split
    replies = idles = errors = 0
    c0, t0 = time.process_time(), now()
    for frames in msgs:
        send_frames(shell, frames)
    deadline = time.monotonic() + timeout
    while replies < n or idles < n:
        events = poller.poll(1000)
        if not events:
            k.check_alive()
            if time.monotonic() > deadline:
                raise BenchError("%d of %d replies, %d idles after %.0f s" % (replies, n, idles, timeout))
        for sock, _ in events:
            while True:
                try:
                    frames_in = recv_frames(sock, NOBLOCK)
                except zmq.Again:
                    break
                h, p, c = split(frames_in)
                if sock is shell:
                    if b'"execute_reply"' not in h:
                        continue
                    replies += 1
                    if b'"ok"' not in c:
                        errors += 1
                elif b'"status"' in h and b'"idle"' in c:
                    idles += 1
    elapsed = (now() - t0) / 1e9
    cpu = time.process_time() - c0
    if errors:
        raise BenchError("%d of %d execute_replies were not ok" % (errors, n))
    return n / elapsed, cpu / elapsed


TEXT_RE = re.compile(rb'"text"\s*:\s*"')
NAME_RE = re.compile(rb'"name"\s*:\s*"(\w+)"')


def stream_bytes(content):
    """(stream name, UTF-8 bytes of text) of a stream message's content frame.

    Without a backslash in the frame the JSON string holds the text's UTF-8 bytes verbatim, so it is cut out
    between its quotes (memchr speed); anything else goes through json.loads."""
    if b"\\" not in content:
        m, n = TEXT_RE.search(content), NAME_RE.search(content)
        if m and n:
            end = content.find(b'"', m.end())
            if end >= 0:
                return n.group(1).decode(), end - m.end()
    d = json.loads(content)
    return d.get("name"), len(d.get("text", "").encode("utf-8"))


def stdout_throughput(k, mb, timeout=600.0):
    """One cell writes mb MiB to stdout; checks that every byte came.

    Returns (MiB/s from request to idle, the fraction of the time the client was on CPU)."""
    code = "import sys\nfor _ in range(%d): sys.stdout.write('x' * %d)" % (mb, MIB)
    expected = mb * MIB
    msg_id, frames = k.build_execute(code)
    mid = b'"' + msg_id.encode() + b'"'    # quoted: id _1 is a prefix of id _10
    shell, poller, split = k.shell, k.poller, k.split
    got = other = 0
    got_reply = got_idle = False
    c0, t0 = time.process_time(), now()
    send_frames(shell, frames)
    deadline = time.monotonic() + timeout
    while not (got_reply and got_idle):
        events = poller.poll(1000)
        if not events:
            k.check_alive()
            if time.monotonic() > deadline:
                raise BenchError("%d of %d bytes after %.0f s" % (got, expected, timeout))
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
                    if b'"ok"' not in c:
                        raise BenchError("execute_reply not ok: %s" % c[:200].decode("utf-8", "replace"))
                    got_reply = True
                elif b'"stream"' in h:
                    name, nbytes = stream_bytes(c)
                    if name == "stdout":
                        got += nbytes
                    else:
                        other += nbytes
                elif b'"status"' in h and b'"idle"' in c:
                    got_idle = True
    elapsed = (now() - t0) / 1e9
    cpu = time.process_time() - c0
    if got != expected or other:
        raise BenchError("received %d stdout bytes of %d (and %d on other streams)" % (got, expected, other))
    return mb / elapsed, cpu / elapsed


# ---- driver --------------------------------------------------------------------------------------------

def find_pyc(given):
    """The pyc-kernel to run, as an absolute path (kernels run in a temporary directory)."""
    if given is not None:
        return os.path.abspath(given) if given and os.sep in given else given
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "..", "pyc-kernel"), os.path.join(here, "..", "build", "pyc-kernel"),
                 os.path.join(os.getcwd(), "pyc-kernel")):
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return os.path.normpath(cand)
    return shutil.which("pyc-kernel") or "pyc-kernel"


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))]


def short(e):
    s = str(e) or type(e).__name__
    return s if isinstance(e, BenchError) else "%s: %s" % (type(e).__name__, s)


def run(args, workdir):
    counts = dict(QUICK if args.quick else FULL)
    for key in counts:
        if getattr(args, key) is not None:
            counts[key] = getattr(args, key)

    env = dict(os.environ)
    for var, sub in (("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_CONFIG_DIR", "config"), ("IPYTHONDIR", "ipython"), ("MPLCONFIGDIR", "mpl")):
        env[var] = os.path.join(workdir, sub)
        os.makedirs(env[var], exist_ok=True)
    env["JUPYTER_PATH"] = env["JUPYTER_DATA_DIR"]
    env["JUPYTER_CONFIG_PATH"] = env["JUPYTER_CONFIG_DIR"]
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"     # ipykernel's debugpy warns about frozen modules otherwise
    env.pop("PYTHONSTARTUP", None)

    pyc_path = find_pyc(args.pyc)
    names = []
    if args.only in (None, "pyc") and pyc_path != "":
        names.append("pyc")
    if args.only in (None, "ipykernel"):
        names.append("ipykernel")
    if not names:
        raise SystemExit("nothing to run: --pyc '' leaves out pyc and --only pyc leaves out ipykernel")

    argv = {
        "pyc": lambda cf: [pyc_path, "-f", cf],
        "ipykernel": lambda cf: [sys.executable, "-m", "ipykernel_launcher", "-f", cf],
    }
    kernels = {n: Kernel(n, argv[n], workdir, env, args.grace, args.start_timeout) for n in names}
    res = {n: {} for n in names}
    err = {n: {} for n in names}

    if "pyc" in names and not (os.path.isfile(pyc_path) and os.access(pyc_path, os.X_OK)):
        err["pyc"]["all"] = "not found or not executable: %r (give --pyc PATH, or --pyc '' to skip)" % pyc_path
    active = [n for n in names if "all" not in err[n]]

    def order(i):
        return active if i % 2 == 0 else active[::-1]

    def note(msg):
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    # 1, 2) cold starts, alternating kernels each round.
    note("cold starts: %d per kernel" % counts["starts"])
    starts = {n: [] for n in active}
    rss = {n: [] for n in active}
    for i in range(counts["starts"]):
        for n in order(i):
            if "start_ms" in err[n]:
                continue
            try:
                ms, mb = cold_start(kernels[n])
                starts[n].append(ms)
                rss[n].append(mb)
            except Exception as e:
                err[n]["start_ms"] = err[n]["rss_mb"] = short(e)
    for n in active:
        if "start_ms" not in err[n]:
            res[n]["start_ms"] = statistics.median(starts[n])
            res[n]["start_ms_all"] = starts[n]
            res[n]["rss_mb"] = statistics.median(rss[n])

    # The steady-state measurements use one long-lived kernel each, restarted if one dies.
    def ready(n):
        k = kernels[n]
        if k.broken:
            raise BenchError(k.broken)
        if not k.alive():
            k.stop()
            try:
                k.start()
            except Exception as e:
                k.broken = "could not (re)start: " + short(e)
                raise BenchError(k.broken)
        return k

    def measure(metric, n, fn):
        try:
            return fn(ready(n))
        except Exception as e:
            err[n][metric] = short(e)
            kernels[n].stop()
            return None

    for n in active:
        measure("pass", n, lambda k: pass_latency(k, min(50, counts["passes"])))   # warm-up, not counted

    # 3) pass round trips, in alternating blocks.
    note("pass round trips: %d per kernel" % counts["passes"])
    blocks = 4
    lat = {n: [] for n in active}
    for b in range(blocks):
        size = counts["passes"] // blocks + (1 if b < counts["passes"] % blocks else 0)
        for n in order(b):
            if "pass" in err[n] or size == 0:
                continue
            got = measure("pass", n, lambda k: pass_latency(k, size))
            if got is not None:
                lat[n] += got
    for n in active:
        if "pass" in err[n]:
            err[n]["pass_p50_ms"] = err[n]["pass_p99_ms"] = err[n].pop("pass")
        elif lat[n]:
            res[n]["pass_p50_ms"] = quantile(lat[n], 0.50)
            res[n]["pass_p99_ms"] = quantile(lat[n], 0.99)

    # 4) pipelined executes.
    note("pipelined: %d requests per kernel" % counts["pipelined"])
    for n in order(0):
        measure("pipelined_rps", n, lambda k: pipelined(k, min(200, counts["pipelined"])))   # warm-up
        err[n].pop("pipelined_rps", None)
    for n in order(1):
        v = measure("pipelined_rps", n, lambda k: pipelined(k, counts["pipelined"]))
        if v is not None:
            res[n]["pipelined_rps"], res[n]["pipelined_rps_client_cpu"] = v

    # 5) stdout throughput.
    note("stdout: %d MB per kernel" % counts["stdout_mb"])
    for n in order(0):
        v = measure("stdout_mbps", n, lambda k: stdout_throughput(k, counts["stdout_mb"]))
        if v is not None:
            res[n]["stdout_mbps"], res[n]["stdout_mbps_client_cpu"] = v

    for k in kernels.values():
        k.stop()
    return names, pyc_path, counts, res, err


ROWS = [
    ("start_ms", "cold start (ms, median)", "%.1f"),
    ("rss_mb", "RSS after start (MB)", "%.1f"),
    ("pass_p50_ms", "pass round trip p50 (ms)", "%.3f"),
    ("pass_p99_ms", "pass round trip p99 (ms)", "%.3f"),
    ("pipelined_rps", "pipelined execute (req/s)", "%.0f"),
    ("stdout_mbps", "stdout (MB/s)", "%.0f"),
]


def report(names, pyc_path, counts, res, err):
    def cell(n, metric, fmt):
        if n not in names:
            return "-", None
        e = err[n].get("all") or err[n].get(metric)
        if e:
            return "ERROR", e
        v = res[n].get(metric)
        return (fmt % v if v is not None else "-"), None

    notes = []      # footnotes; rows with the same message share one

    def note(text):
        if text not in notes:
            notes.append(text)
        return notes.index(text) + 1

    lines = []
    hdr = ("%-27s %11s %-16s %11s %9s" % ("", "pyc", "target", "ipykernel", "pyc/ipyk"))
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for metric, label, fmt in ROWS:
        cells = {}
        for n in ("pyc", "ipykernel"):
            text, e = cell(n, metric, fmt)
            if e:
                text = "ERROR [%d]" % note("%s: %s" % (n, e))
            cells[n] = text
        target = ""
        if metric in TARGETS:
            op, goal = TARGETS[metric]
            target = "%s %s" % (op, fmt % goal if goal < 100 else "{:,.0f}".format(goal))
            v = res.get("pyc", {}).get(metric)
            if v is not None:
                met = v <= goal if op == "<=" else v >= goal
                target += " met" if met else " NOT met"
        for n in ("pyc", "ipykernel"):
            busy = res.get(n, {}).get(metric + "_client_cpu")
            if busy is not None and busy >= CLIENT_BOUND:
                cells[n] += " [%d]" % note("%s, %s: the client was on CPU %.0f%% of the time, so this may "
                                           "measure the client" % (n, label, 100 * busy))
        a, b = res.get("pyc", {}).get(metric), res.get("ipykernel", {}).get(metric)
        ratio = "%.2fx" % (a / b) if a is not None and b else "-"
        lines.append("%-27s %11s %-16s %11s %9s" % (label, cells["pyc"], target, cells["ipykernel"], ratio))
    print("pyc-kernel: %s" % (pyc_path if "pyc" in names else "(skipped)"))
    print("ipykernel:  %s" % ("%s on Python %s" % (ipykernel_version(), platform.python_version())
                               if "ipykernel" in names else "(skipped)"))
    print("counts:     %d cold starts, %d pass round trips, %d pipelined requests, %d MB of stdout"
          % (counts["starts"], counts["passes"], counts["pipelined"], counts["stdout_mb"]))
    print()
    print("\n".join(lines))
    print("(times: lower is better, so pyc/ipyk < 1 favours pyc; rates: higher is better)")
    for i, n in enumerate(notes, 1):
        print("[%d] %s" % (i, n))


def ipykernel_version():
    try:
        import ipykernel
        return "ipykernel " + ipykernel.__version__
    except ImportError:
        return "ipykernel (not importable)"


def main():
    ap = argparse.ArgumentParser(description="Side-by-side benchmark of pyc-kernel and ipykernel.")
    ap.add_argument("--pyc", metavar="PATH",
                    help="pyc-kernel binary (default: the one in bench/.., in the current directory, or on "
                         "PATH); '' to skip pyc")
    ap.add_argument("--only", choices=["pyc", "ipykernel"], help="measure one kernel only")
    ap.add_argument("--quick", action="store_true", help="small counts, under 30 s for both kernels")
    ap.add_argument("--json", metavar="FILE", help="also write the numbers as JSON to FILE")
    ap.add_argument("--starts", type=int, help="cold starts per kernel (default 10, quick 3)")
    ap.add_argument("--passes", type=int, help="pass round trips per kernel (default 2000, quick 300)")
    ap.add_argument("--pipelined", type=int, help="pipelined requests (default 10000, quick 1000)")
    ap.add_argument("--stdout-mb", dest="stdout_mb", type=int, help="MB written to stdout (default 200, quick 20)")
    ap.add_argument("--grace", type=float, default=3.0, help="seconds after shutdown_request before SIGKILL")
    ap.add_argument("--start-timeout", dest="start_timeout", type=float, default=30.0,
                    help="seconds to wait for a kernel's first kernel_info_reply (default 30)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (kernel logs)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args()

    atexit.register(kill_all)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    workdir = tempfile.mkdtemp(prefix="pyc-bench-")
    try:
        names, pyc_path, counts, res, err = run(args, workdir)
    except KeyboardInterrupt:
        print("interrupted; killing every kernel it started", file=sys.stderr)
        raise SystemExit(130)
    finally:
        kill_all()
        zmq.Context.instance().destroy(linger=0)
        if args.keep:
            print("kept %s" % workdir, file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    report(names, pyc_path, counts, res, err)
    if args.json:
        out = {
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                     "ipykernel": ipykernel_version()},
            "pyc": pyc_path if "pyc" in names else None,
            "counts": counts,
            "targets": {m: {"op": op, "value": v} for m, (op, v) in TARGETS.items()},
            "results": {n: dict(res[n], errors=err[n]) for n in names},
        }
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
