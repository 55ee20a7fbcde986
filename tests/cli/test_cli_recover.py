"""Issue 35, item 2: a session that ended names the checkpoint that brings its work back -- in its ready and
closed events, `pyc ls`, `pyc status`, the stale-session error and `pyc run` of a cell that killed the kernel
-- and `pyc new NAME --replay` without a file replays the newest checkpoint of NAME."""

import json
import os
import signal

from clitest import (EXIT_LOST, EXIT_NOSESSION, EXIT_OK, EXIT_USAGE, pyc, read_session, unique_name,
                     wait_gone)

CRASH = "import ctypes; ctypes.string_at(0)"


def events(name):
    return [json.loads(l) for l in pyc("events", "--json", name, check=EXIT_OK).stdout.splitlines()]


def of(name, pid, event):
    return [e for e in events(name) if e["pid"] == pid and e["event"] == event]


def test_a_crash_names_its_checkpoint_and_replay_brings_it_back(sessions):
    name = sessions.new()
    pid = read_session(name)["pid"]
    ready = of(name, pid, "ready")
    assert len(ready) == 1 and os.path.isfile(ready[0]["checkpoint"]), ready
    checkpoint = ready[0]["checkpoint"]
    pyc("run", name, "x = 41", check=EXIT_OK)
    p = pyc("run", name, CRASH, check=EXIT_LOST)
    assert checkpoint in p.stderr and "pyc new %s --replay" % name in p.stderr, p.stderr
    assert wait_gone(pid)
    closed = of(name, pid, "closed")
    assert [c["reason"] for c in closed] == ["crashed"] and closed[0]["checkpoint"] == checkpoint, closed
    # pyc events' text form shows it
    text = [l for l in pyc("events", name, check=EXIT_OK).stdout.splitlines() if " closed " in l]
    assert text and text[-1].endswith("checkpoint " + checkpoint), text
    # pyc ls: the last column of the row, and "checkpoint" in --json
    header, *rows = pyc("ls", check=EXIT_OK).stdout.splitlines()
    assert header.split()[-1] == "CHECKPOINT", header
    row = [r for r in rows if r.split()[0] == name]
    assert row and row[0].endswith("  " + checkpoint), row
    entry = [e for e in json.loads(pyc("ls", "--json", check=EXIT_OK).stdout) if e["name"] == name]
    assert entry[0]["state"] == "stale" and entry[0]["checkpoint"] == checkpoint, entry
    # pyc status: still "no such session", but with what is left of it
    p = pyc("status", name, check=EXIT_NOSESSION)
    st = json.loads(p.stdout)
    assert st == {"name": name, "pid": pid, "state": "stale", "reason": "crashed", "signal": 11,
                  "checkpoint": checkpoint, "replay": "pyc new %s --replay" % name}, st
    assert "crashed (SIGSEGV)" in p.stderr and checkpoint in p.stderr, p.stderr
    # any command's stale-session error names it too
    p = pyc("run", name, "x", check=EXIT_NOSESSION)
    assert checkpoint in p.stderr, p.stderr
    # --replay without a file takes that checkpoint (a stale session is cleaned first), and says so
    p = pyc("new", name, "--replay", check=EXIT_OK)
    sessions.adopt(name)
    assert checkpoint in p.stderr and "1 cell" in p.stderr, p.stderr
    assert pyc("run", name, "x + 1", check=EXIT_OK).stdout.strip() == "42"


def test_replay_argument_forms(sessions, tmp_path):
    name = sessions.new()
    pid = read_session(name)["pid"]
    pyc("run", name, "y = 'kept'", check=EXIT_OK)
    checkpoint = of(name, pid, "ready")[0]["checkpoint"]
    pyc("kill", name, check=EXIT_OK)
    closed = of(name, pid, "closed")
    assert closed[0]["reason"] == "shutdown" and closed[0]["checkpoint"] == checkpoint, closed
    # the session file is gone: status still says where its work is
    p = pyc("status", name, check=EXIT_NOSESSION)
    st = json.loads(p.stdout)
    assert st["state"] == "none" and st["pid"] is None and st["checkpoint"] == checkpoint, st
    # --replay before NAME is bare: NAME is the session's
    p = pyc("new", "--replay", name, check=EXIT_OK)
    sessions.adopt(name)
    assert checkpoint in p.stderr, p.stderr
    assert pyc("run", name, "y", check=EXIT_OK).stdout.strip() == "'kept'"
    # --replay FILE and --replay=FILE as before
    for form in (["--replay", checkpoint], ["--replay=" + checkpoint]):
        other = unique_name("form")
        p = pyc("new", other, *form, check=EXIT_OK)
        sessions.adopt(other)
        assert "newest checkpoint" not in p.stderr, p.stderr
        assert pyc("run", other, "y", check=EXIT_OK).stdout.strip() == "'kept'"
    # no checkpoint of that name: a usage error, and nothing is started
    lonely = unique_name("lonely")
    p = pyc("new", lonely, "--replay", check=EXIT_USAGE)
    assert "no checkpoint of session %s" % lonely in p.stderr, p.stderr
    pyc("status", lonely, check=EXIT_NOSESSION)
    missing = tmp_path / "missing.py"
    pyc("new", lonely, "--replay", str(missing), check=EXIT_USAGE)


def test_only_a_checkpoint_with_cells_is_named(sessions):
    # a session that ran no cell: its closed event names no file, and its stale entry has none
    name = sessions.new()
    pid = read_session(name)["pid"]
    pyc("kill", name, check=EXIT_OK)
    closed = of(name, pid, "closed")
    assert closed and "checkpoint" not in closed[0], closed
    # a kernel killed from outside: the closed event pyc writes (vanished) names the ready event's file
    name = sessions.new()
    pid = read_session(name)["pid"]
    pyc("run", name, "z = 1", check=EXIT_OK)
    checkpoint = of(name, pid, "ready")[0]["checkpoint"]
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid)
    entry = [e for e in json.loads(pyc("ls", "--json", check=EXIT_OK).stdout) if e["name"] == name]
    assert entry[0]["reason"] == "vanished" and entry[0]["checkpoint"] == checkpoint, entry
    assert of(name, pid, "closed")[0]["checkpoint"] == checkpoint
    # a live session's ls row has no checkpoint column value
    live = sessions.new()
    row = [r for r in pyc("ls", check=EXIT_OK).stdout.splitlines() if r.split()[0] == live]
    assert row[0].split()[-1] == "-", row
    entry = [e for e in json.loads(pyc("ls", "--json", check=EXIT_OK).stdout) if e["name"] == live]
    assert "checkpoint" not in entry[0], entry
