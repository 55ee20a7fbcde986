"""`pyc events`: the sessions' event log (ready, cells, how each session ended), `pyc ls` telling what ended a
stale session, and `pyc run` on a kernel that crashes during the cell (exit 7, the error printed)."""

import json
import os
import select
import signal
import stat
import subprocess
import time

import pyctest
from clitest import (EXIT_INTERRUPTED, EXIT_LOST, EXIT_NOSESSION, EXIT_OK, EXIT_PIPE, EXIT_TIMEOUT, EXIT_USAGE,
                     PYC_CLI, pyc, read_session, runtime_dir, session_file, unique_name, wait_gone)

CRASH = "import ctypes; ctypes.string_at(0)"


def events(*names, since=None, env=None):
    args = ["events", "--json"] + list(names)
    if since is not None:
        args += ["--since", since]
    p = pyc(*args, check=EXIT_OK, env=env)
    return [json.loads(line) for line in p.stdout.splitlines()]


def closed_of(name, pid):
    return [e for e in events(name) if e["event"] == "closed" and e["pid"] == pid]


def wait_for(what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.05)
    return what()


def ls_row(name):
    rows = [l for l in pyc("ls", check=EXIT_OK).stdout.splitlines() if l.split()[:1] == [name]]
    entry = [e for e in json.loads(pyc("ls", "--json", check=EXIT_OK).stdout) if e["name"] == name]
    return (rows[0] if rows else None), (entry[0] if entry else None)


def test_outcomes_of_isolated_and_timed_out_cells(sessions):
    """cell_done carries metadata.pyc's outcome also for an isolated cell, whose outcome comes from its child
    (it was read after being freed once: the event said "\u0003")."""
    name = sessions.new()
    pyc("run", name, "--isolate", "g = (i for i in range(3)); kept = 1", check=EXIT_OK)
    pyc("run", name, "--isolate", "1/0", check=1)
    pyc("run", name, "--timeout", "0.5", "import time; time.sleep(10)", check=EXIT_TIMEOUT)
    done = [e["outcome"] for e in events(name) if e["event"] == "cell_done"]
    assert done == ["ok", "error", "timeout"]


def test_cell_events_and_cursor(sessions):
    name = sessions.new()
    pid = read_session(name)["pid"]
    pyc("run", name, "x = 1", check=EXIT_OK)
    pyc("run", name, "1/0", check=1)
    evs = events(name)
    assert [e["event"] for e in evs] == ["ready", "cell_started", "cell_done", "cell_started", "cell_done"], evs
    for e in evs:
        assert e["session"] == name and e["pid"] == pid and isinstance(e["time"], float)
        assert abs(e["time"] - time.time()) < 60
    assert [e["seq"] for e in evs] == sorted(e["seq"] for e in evs)
    started, done = evs[1], evs[2]
    assert started["id"] == done["id"] and len(started["id"]) >= 16 and started["count"] == 1
    assert done["outcome"] == "ok" and evs[4]["outcome"] == "error" and evs[3]["id"] != started["id"]
    # silent requests (pyc vars, status probes) are not cells
    pyc("vars", name, check=EXIT_OK)
    assert len(events(name)) == 5
    # --since SEQ resumes exactly after SEQ; the text form starts with the seq, the cursor
    cursor = evs[2]["seq"]
    assert events(name, since=cursor) == evs[3:]
    text = pyc("events", name, "--since", cursor, check=EXIT_OK).stdout.splitlines()
    assert [int(l.split()[0]) for l in text] == [e["seq"] for e in evs[3:]]
    assert text[-1].split()[3:6] == [name, str(pid), "cell_done"] and text[-1].endswith(" error"), text
    last = max(e["seq"] for e in events())
    assert events(since=last) == []
    pyc("events", "--since", "soon", check=EXIT_USAGE)
    pyc("events", "Bad.Name", check=EXIT_USAGE)
    # the log is private
    path = os.path.join(runtime_dir(), "pyc-events.jsonl")
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600


def test_crash_is_explained(sessions):
    """A cell that segfaults the kernel: `pyc run` prints the error and exits 7 (with --json, the error and
    execute_reply lines); the closed event has the signal and the traceback; ls and a later run say so."""
    name = sessions.new()
    pid = read_session(name)["pid"]
    t0 = time.monotonic()
    p = pyc("run", name, CRASH, check=EXIT_LOST)
    assert time.monotonic() - t0 < 8
    assert "KernelDied" in p.stderr and "signal 11" in p.stderr and "string_at" in p.stderr, p.stderr
    assert wait_gone(pid)
    closed = wait_for(lambda: closed_of(name, pid))
    assert len(closed) == 1, closed
    c = closed[0]
    assert c["reason"] == "crashed" and c["signal"] == 11 and c["signal_name"] == "SIGSEGV"
    assert "string_at" in c["traceback"] and "pyc_%d/" % pid in c["traceback"], c["traceback"]
    started = [e for e in events(name) if e["event"] == "cell_started"]
    assert c["cell"] == started[-1]["id"]
    row, entry = ls_row(name)
    assert "crashed (SIGSEGV)" in row, row
    assert entry["state"] == "stale" and entry["reason"] == "crashed" and entry["signal"] == 11
    p = pyc("run", name, "1", check=EXIT_NOSESSION)
    assert "crashed (SIGSEGV)" in p.stderr, p.stderr
    # noticing it again writes nothing more (the kernel said how it ended)
    assert len(closed_of(name, pid)) == 1

    name = sessions.new()
    p = pyc("run", name, "--json", CRASH, check=EXIT_LOST)
    lines = [json.loads(l) for l in p.stdout.splitlines()]
    assert [l["type"] for l in lines] == ["error", "execute_reply", "outcome"], lines
    assert lines[0]["content"]["ename"] == "KernelDied"
    assert lines[2]["outcome"] == "lost" and lines[2]["exit"] == EXIT_LOST and lines[2]["by"] == "pyc"
    pm = lines[1]["metadata"]["pyc"]
    assert pm["outcome"] == "died" and pm["state"] == "lost" and pm["signal"] == 11


def test_limits_end_sessions_with_their_reason(sessions):
    idle = unique_name("idle")
    life = unique_name("life")
    pyc("new", idle, check=EXIT_OK, env=pyctest.child_env(PYC_IDLE_TIMEOUT="1"))
    sessions.adopt(idle)
    pyc("new", life, check=EXIT_OK, env=pyctest.child_env(PYC_LIFETIME="2"))
    sessions.adopt(life)
    for name, reason, text in ((idle, "idle_timeout", "ended (idle timeout)"), (life, "lifetime", "ended (lifetime)")):
        pid = read_session(name)["pid"]
        assert wait_gone(pid, 15), name
        closed = wait_for(lambda: closed_of(name, pid))
        assert [c["reason"] for c in closed] == [reason], closed
        row, entry = ls_row(name)
        assert text in row and entry["reason"] == reason, (row, entry)


def test_kill_replace_and_vanished(sessions):
    # pyc kill of a live session: the kernel shuts down and says so
    name = sessions.new()
    pid = read_session(name)["pid"]
    pyc("kill", name, check=EXIT_OK)
    assert [c["reason"] for c in closed_of(name, pid)] == ["shutdown"]

    # new --replace: the old kernel ends as replaced (it is told why)
    name = sessions.new()
    pid = read_session(name)["pid"]
    pyc("new", name, "--replace", check=EXIT_OK)
    new_pid = sessions.adopt(name)
    assert [c["reason"] for c in closed_of(name, pid)] == ["replaced"]
    ready = [e for e in events(name) if e["event"] == "ready"]
    assert ready[-1]["pid"] == new_pid

    # an unresponsive kernel (stopped) replaced, then one killed: pyc had to SIGKILL, and says so
    os.kill(new_pid, signal.SIGSTOP)
    try:
        pyc("new", name, "--replace", check=EXIT_OK)
    finally:
        if pyctest.pid_alive(new_pid):
            os.kill(new_pid, signal.SIGCONT)
    assert [c["reason"] for c in closed_of(name, new_pid)] == ["replaced"]
    pid = sessions.adopt(name)
    os.kill(pid, signal.SIGSTOP)
    try:
        pyc("kill", name, check=EXIT_OK)
    finally:
        if pyctest.pid_alive(pid):
            os.kill(pid, signal.SIGCONT)
    assert [c["reason"] for c in closed_of(name, pid)] == ["killed"]

    # SIGKILL from outside: the first pyc that notices (here ls) records vanished, once
    name = sessions.new()
    pid = read_session(name)["pid"]
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid)
    row, entry = ls_row(name)
    assert row.split()[2] == "stale" and entry["reason"] == "vanished", (row, entry)
    pyc("ls", check=EXIT_OK)
    pyc("run", name, "1", check=EXIT_NOSESSION)
    assert [c["reason"] for c in closed_of(name, pid)] == ["vanished"]
    # ... and `pyc events` itself notices too
    name = sessions.new()
    pid = read_session(name)["pid"]
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid)
    assert [c["reason"] for c in closed_of(name, pid)] == ["vanished"]


def test_forked_sessions_write_under_their_names(sessions):
    parent = sessions.new()
    child = unique_name("child")
    pyc("fork", parent, child, check=EXIT_OK)
    child_pid = sessions.adopt(child)
    pyc("run", child, "y = 2", check=EXIT_OK)
    evs = events(child)
    assert [e["event"] for e in evs] == ["ready", "cell_started", "cell_done"], evs
    assert all(e["pid"] == child_pid for e in evs) and evs[0]["forked_from"] == parent
    assert [e["event"] for e in events(parent)] == ["ready"]


def test_rotation_keeps_the_bound(sessions):
    env = pyctest.child_env(PYC_EVENTS_MAX_BYTES="4096")
    name = unique_name("rot")
    pyc("new", name, check=EXIT_OK, env=env)
    sessions.adopt(name)
    path = os.path.join(runtime_dir(), "pyc-events.jsonl")
    old = os.path.join(runtime_dir(), "pyc-events.1.jsonl")
    for i in range(25):
        pyc("run", name, "x = %d" % i, check=EXIT_OK, env=env)
        assert os.path.getsize(path) <= 4096
    assert os.path.getsize(old) <= 4096 and stat.S_IMODE(os.lstat(old).st_mode) == 0o600
    evs = events(name)
    seqs = [e["seq"] for e in events()]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
    assert evs[-1]["event"] == "cell_done" and evs[-1]["count"] == 25
    # --since across both files resumes exactly
    cursor = seqs[len(seqs) // 3]
    assert [e["seq"] for e in events(since=cursor)] == [s for s in seqs if s > cursor]


def test_a_cursor_older_than_the_log_gets_a_gap_and_one_from_the_future_an_error(sessions):
    """Issue 35, item 3: events the rotation dropped are not skipped in silence, and a cursor past the newest
    event (from another log, or a log removed since) is refused rather than waited on."""
    env = pyctest.child_env(PYC_EVENTS_MAX_BYTES="4096")
    name = unique_name("gap")
    pyc("new", name, check=EXIT_OK, env=env)
    sessions.adopt(name)
    for i in range(25):
        pyc("run", name, "x = %d" % i, check=EXIT_OK, env=env)
    seqs = [e["seq"] for e in events()]
    oldest, newest = seqs[0], seqs[-1]
    assert oldest > 3, seqs
    got = events(since=1)
    gap = got[0]
    assert gap == {"seq": oldest - 1, "time": got[1]["time"], "session": None, "pid": None, "event": "gap",
                   "from": 2, "to": oldest - 1, "lost": oldest - 2}, gap
    assert [e["seq"] for e in got[1:]] == seqs
    # only for a cursor: the whole log, and a cursor inside it, have none
    assert all(e["event"] != "gap" for e in events()) and all(e["event"] != "gap" for e in events(since=oldest))
    # also when only some sessions are asked for (the lost events may have been theirs)
    assert events(name, since=1)[0]["event"] == "gap"
    text = pyc("events", name, "--since", 1, check=EXIT_OK).stdout.splitlines()
    assert text[0].split()[:1] == [str(oldest - 1)] and " - - gap %d events lost" % (oldest - 2) in text[0], text
    # a cursor from the future
    assert events(since=newest) == []
    p = pyc("events", "--since", newest + 5, check=EXIT_USAGE)
    assert p.stdout == "" and "past the newest event" in p.stderr and str(newest) in p.stderr, p.stderr
    pyc("events", "--since", newest + 5, "--follow", check=EXIT_USAGE)


def test_cell_done_carries_the_output_size_and_on_request_its_head(sessions):
    plain = sessions.new()
    pyc("run", plain, "print('hello world')", check=EXIT_OK)
    pyc("run", plain, "x = 1", check=EXIT_OK)
    done = [e for e in events(plain) if e["event"] == "cell_done"]
    assert [(d["output_bytes"], d["output_messages"]) for d in done] == [(12, 1), (0, 0)], done
    assert all("output_head" not in d for d in done)
    # --event-output N: the first N bytes of the text a reader sees (streams, results, the error's line)
    name = unique_name("head")
    pyc("new", name, "--event-output", "40", check=EXIT_OK)
    sessions.adopt(name)
    pyc("run", name, "print('a' * 30); 7 * 6", check=EXIT_OK)
    pyc("run", name, "print('before'); 1/0", check=1)
    pyc("run", name, "print('é' * 30)", check=EXIT_OK)
    pyc("run", name, "--isolate", "print('from the child')", check=EXIT_OK)
    done = [e for e in events(name) if e["event"] == "cell_done"]
    assert done[0]["output_head"] == "a" * 30 + "\n42\n" and done[0]["output_messages"] == 2, done[0]
    assert done[1]["output_head"] == "before\nZeroDivisionError: division by zero\n"[:40], done[1]
    assert done[2]["output_head"] == "é" * 20 and done[2]["output_bytes"] == 61, done[2]
    assert done[3]["output_head"] == "from the child\n", done[3]
    # the kernel keeps at most 4096 bytes of it: more is a usage error of pyc new
    p = pyc("new", unique_name("big"), "--event-output", "5000", check=EXIT_USAGE)
    assert "--event-output" in p.stderr, p.stderr


class LineReader:
    """Lines of a process's stdout, read with a deadline (raw reads and select: a buffered readline would
    take more than one line out of the pipe, where select no longer sees it)."""

    def __init__(self, f):
        self.fd = f.fileno()
        self.buf = b""

    def line(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def test_follow(sessions):
    name = sessions.new()
    p = subprocess.Popen([PYC_CLI, "events", name, "--follow", "--json"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=pyctest.child_env())
    pyctest.register_pid(p.pid)
    try:
        out = LineReader(p.stdout)
        first = json.loads(out.line())
        assert first["event"] == "ready" and first["session"] == name
        pyc("run", name, "z = 3", check=EXIT_OK)
        got = [json.loads(out.line()), json.loads(out.line())]
        assert [e["event"] for e in got] == ["cell_started", "cell_done"], got
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=5) == EXIT_INTERRUPTED
    finally:
        pyctest.kill_pid(p.pid)
    # a follower whose reader goes away ends (141), even while nothing happens
    p = subprocess.Popen([PYC_CLI, "events", name, "--follow"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=pyctest.child_env())
    pyctest.register_pid(p.pid)
    try:
        assert LineReader(p.stdout).line()
        p.stdout.close()
        assert p.wait(timeout=5) == EXIT_PIPE
    finally:
        pyctest.kill_pid(p.pid)
