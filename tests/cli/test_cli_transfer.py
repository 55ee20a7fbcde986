"""`pyc fork` (comm target pyc.fork) and `pyc cp` (comm target pyc.pickle), through the built pyc."""

import glob
import json
import os
import pickle
import signal
import stat
import subprocess
import time

import pytest

import pyctest
from clitest import (EXIT_CONNECTION, EXIT_EXISTS, EXIT_INTERRUPTED, EXIT_NOINPUT, EXIT_NOSESSION, EXIT_OK, EXIT_REFUSED, EXIT_USAGE,
                     PYC_CLI, pyc,
                     read_session, run_in_background, runtime_dir, session_file, unique_name, wait_busy, wait_gone)

np = pytest.importorskip("numpy")


def test_fork_makes_named_sessions_that_outlive_the_parent(sessions):
    parent = sessions.new()
    pyc("run", parent, "import numpy as np\nbase = 41\narr = np.arange(5)", check=EXIT_OK)
    k1, k2 = unique_name("kid"), unique_name("kid")
    p = pyc("fork", parent, k1, k2, check=EXIT_OK)
    sessions.adopt(k1)
    sessions.adopt(k2)
    assert p.stdout.splitlines() == [session_file(k1), session_file(k2)]
    for k in (k1, k2):
        assert stat.S_IMODE(os.stat(session_file(k)).st_mode) == 0o600
        assert pyctest.pid_alive(read_session(k)["pid"])
    # the children's own files are gone: each child is listed once, under its new name
    assert glob.glob(os.path.join(runtime_dir(), "pyc-%s-fork-*.json" % parent)) == []
    # each child has the parent's state, and its own from then on
    assert pyc("run", k1, "base + 1", check=EXIT_OK).stdout == "42\n"
    pyc("run", k1, "base = 0", check=EXIT_OK)
    assert pyc("run", k2, "base, int(arr.sum())", check=EXIT_OK).stdout == "(41, 10)\n"
    assert pyc("run", parent, "base", check=EXIT_OK).stdout == "41\n"
    # they outlive the parent
    parent_pid = read_session(parent)["pid"]
    pyc("kill", parent, check=EXIT_OK)
    assert wait_gone(parent_pid)
    assert pyc("run", k2, "base", check=EXIT_OK).stdout == "41\n"
    entries = {e["name"]: e["state"] for e in json.loads(pyc("ls", "--json", check=EXIT_OK).stdout)}
    assert entries.get(k1) == "live" and entries.get(k2) == "live" and parent not in entries
    # and `pyc kill` ends a child like any session
    kid_pid = read_session(k1)["pid"]
    pyc("kill", k1, check=EXIT_OK)
    assert wait_gone(kid_pid)


def test_fork_says_what_the_children_lack(sessions):
    """`pyc fork` names what the forked sessions do not have of the parent (its threads here), on stderr in text
    and in each child's record with --json; a parent without them gets no such line."""
    parent = sessions.new()
    k0 = unique_name("kid")
    p = pyc("fork", parent, k0, check=EXIT_OK)
    sessions.adopt(k0)
    assert p.stderr == "", p.stderr
    pyc("run", parent, "import threading\nstop = threading.Event()\n"
                       "threading.Thread(target=stop.wait, name='server', daemon=True).start()", check=EXIT_OK)
    k1, k2 = unique_name("kid"), unique_name("kid")
    p = pyc("fork", parent, k1, check=EXIT_OK)
    sessions.adopt(k1)
    assert p.stdout.splitlines() == [session_file(k1)]
    assert "pyc: 1 thread other than the main one (server): not in the forked sessions\n" == p.stderr, p.stderr
    records = json.loads(pyc("fork", parent, k2, "--json", check=EXIT_OK).stdout)
    sessions.adopt(k2)
    assert len(records[0]["not_carried"]) == 1 and "(server)" in records[0]["not_carried"][0], records
    # the child really lacks it
    assert pyc("run", k1, "import threading; [t.name for t in threading.enumerate()]",
               check=EXIT_OK).stdout == "['MainThread']\n"


def test_fork_refuses_a_taken_name(sessions):
    parent = sessions.new()
    taken = sessions.new()
    fresh = unique_name("kid")
    p = pyc("fork", parent, fresh, taken, check=EXIT_EXISTS)
    assert "already exists" in p.stderr
    assert not os.path.exists(session_file(fresh))
    json_out = pyc("fork", parent, fresh, "--json", check=EXIT_OK).stdout
    sessions.adopt(fresh)
    (entry,) = json.loads(json_out)
    assert entry["name"] == fresh and entry["pid"] == read_session(fresh)["pid"]


def test_fork_waits_for_a_running_cell(sessions):
    """The fork request queues behind a running cell: fork waits for it as long as the kernel lives (a deadline
    left children nobody adopted), says why after 2 s, and Ctrl-C stops the wait saying that children may
    still appear, as PARENT-fork-PID sessions."""
    parent = sessions.new()
    runner = run_in_background(parent, "import time\ntime.sleep(3.5)")
    try:
        assert wait_busy(parent)
        kid = unique_name("kid")
        p = pyc("fork", parent, kid, check=EXIT_OK)
        sessions.adopt(kid)
        assert "waiting for the kernel" in p.stderr, p.stderr
        assert pyctest.pid_alive(read_session(kid)["pid"])
        runner.communicate(timeout=30)
        assert runner.returncode == EXIT_OK

        runner = run_in_background(parent, "import time\ntime.sleep(30)")
        assert wait_busy(parent)
        late = unique_name("kid")
        f = subprocess.Popen([PYC_CLI, "fork", parent, late], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=pyctest.child_env())
        try:
            time.sleep(0.5)
            f.send_signal(signal.SIGINT)
            out, err = f.communicate(timeout=10)
        finally:
            if f.poll() is None:
                f.kill()
                f.wait()
        assert f.returncode == EXIT_INTERRUPTED, (f.returncode, err)
        assert "may still fork" in err and "%s-fork-PID" % parent in err, err
        assert not os.path.exists(session_file(late))
        pyc("int", parent, check=EXIT_OK)
        runner.communicate(timeout=20)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    # the kernel got to the request after all: the child lists itself, and is ended like any session
    pattern = os.path.join(runtime_dir(), "pyc-%s-fork-*.json" % parent)
    deadline = time.monotonic() + 20
    while not glob.glob(pattern) and time.monotonic() < deadline:
        time.sleep(0.05)
    orphans = [os.path.basename(f)[4:-5] for f in glob.glob(pattern)]
    assert len(orphans) == 1, orphans
    sessions.adopt(orphans[0])
    entries = {e["name"]: e["state"] for e in json.loads(pyc("ls", "--json", check=EXIT_OK).stdout)}
    assert entries[orphans[0]] == "live"


def test_cp_timeout_is_no_answer(sessions, tmp_path):
    """--timeout bounds the wait for the kernel's answer: none in time is exit 6 (the kernel did not answer);
    exit 5 is the cell's own deadline only."""
    a = sessions.new()
    pyc("run", a, "x = 1", check=EXIT_OK)
    runner = run_in_background(a, "import time\ntime.sleep(30)")
    try:
        assert wait_busy(a)
        t0 = time.monotonic()
        p = pyc("cp", "%s:x" % a, str(tmp_path / "x.pkl"), "--timeout", "0.5", check=EXIT_CONNECTION)
        assert time.monotonic() - t0 < 10
        assert "no answer" in p.stderr
        assert not (tmp_path / "x.pkl").exists()
        pyc("int", a, check=EXIT_OK)
        runner.communicate(timeout=20)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


@pytest.fixture
def two(sessions):
    a, b = sessions.new(), sessions.new()
    pyc("run", a, "import numpy as np\narr = np.arange(12.0).reshape(3, 4)\nro = np.frombuffer(b'abcd', dtype=np.uint8)\n"
                  "small = {'k': [1, 2]}\nlam = lambda: 1\nimport os\n_private = 5", check=EXIT_OK)
    return a, b


def test_cp_session_to_file_and_back(two, tmp_path):
    a, b = two
    f = tmp_path / "arr.pkl"
    pyc("cp", "%s:arr" % a, str(f), check=EXIT_OK)
    # a plain pickle file: NumPy's out-of-band buffers were put back in band
    with open(f, "rb") as fh:
        arr = pickle.load(fh)
    assert isinstance(arr, np.ndarray) and arr.shape == (3, 4) and arr.flags.writeable
    assert (arr == np.arange(12.0).reshape(3, 4)).all()
    g = tmp_path / "ro.pkl"
    pyc("cp", "%s:ro" % a, str(g), check=EXIT_OK)
    with open(g, "rb") as fh:
        ro = pickle.load(fh)
    assert bytes(ro) == b"abcd" and not ro.flags.writeable
    # file to session, under a new name
    pyc("cp", str(f), "%s:arr2" % b, check=EXIT_OK)
    assert pyc("run", b, "float(arr2.sum()), arr2.dtype.name", check=EXIT_OK).stdout == "(66.0, 'float64')\n"
    # a pickle written by Python itself
    h = tmp_path / "py.pkl"
    h.write_bytes(pickle.dumps({"from": "python"}, protocol=4))
    pyc("cp", str(h), "%s:frompy" % b, check=EXIT_OK)
    assert pyc("run", b, "frompy", check=EXIT_OK).stdout == "{'from': 'python'}\n"


def test_cp_session_to_session(two):
    a, b = two
    pyc("cp", "%s:arr" % a, "%s:" % b, check=EXIT_OK)                # keeps its name
    pyc("cp", "%s:small" % a, "%s:renamed" % b, check=EXIT_OK)
    assert pyc("run", b, "arr.shape, renamed", check=EXIT_OK).stdout == "((3, 4), {'k': [1, 2]})\n"


@pytest.mark.parametrize(
    "frame_max, nbytes",
    [
        # the test command: frames of 1 MiB (pyc cp's PYC_MAX_MESSAGE_BYTES, the smallest frame it cuts)
        pytest.param(1 << 20, (7 << 20) // 2, id="1MiB-frames"),
        # check-slow: the real frame, 256 MiB, and a buffer of 300 MB
        pytest.param(None, 300 << 20, id="256MiB-frames", marks=pytest.mark.slow),
    ],
)
def test_cp_of_buffers_larger_than_a_frame(two, sessions, tmp_path, frame_max, nbytes):
    """A buffer over the largest frame (256 MiB, the largest a kernel takes before it has checked the key, or
    less when PYC_MAX_MESSAGE_BYTES says so) goes to the destination kernel in frames of that size: session to
    session, and from a file to a session.  The destination takes no larger frame (its own
    PYC_MAX_MESSAGE_BYTES): one would end the connection, and the copy would fail."""
    a, b = two
    env = None
    if frame_max:
        env = pyctest.child_env(PYC_MAX_MESSAGE_BYTES=str(frame_max))
        b = unique_name()
        pyc("new", b, check=EXIT_OK, env=env)
        sessions.adopt(b)
    pyc("run", a, "big = np.arange(%d // 8, dtype=np.int64)" % nbytes, check=EXIT_OK)
    pyc("cp", "%s:big" % a, "%s:" % b, check=EXIT_OK, timeout=120, env=env)
    assert pyc("run", b, "big.nbytes, int(big[-1]), big.flags.writeable", check=EXIT_OK).stdout == \
        "(%d, %d, True)\n" % (nbytes, nbytes // 8 - 1)
    f = tmp_path / "big.pkl"
    pyc("run", a, "import pickle\nwith open(%r, 'wb') as fh: pickle.dump(big, fh, protocol=5)\ndel big" % str(f),
        check=EXIT_OK)
    assert f.stat().st_size > nbytes
    pyc("cp", str(f), "%s:fromfile" % b, check=EXIT_OK, timeout=120, env=env)
    assert pyc("run", b, "ok = bool((fromfile == big).all())\ndel big, fromfile\nok", check=EXIT_OK).stdout == "True\n"


def test_cp_whole_namespace(two, tmp_path):
    a, b = two
    p = pyc("cp", "%s:" % a, "%s:" % b, check=EXIT_OK)
    # the lambda cannot be pickled: reported, not copied; the module is named too, with what to do
    assert "lam" in p.stderr and "not copied" in p.stderr
    assert "  lam: cannot be pickled: " in p.stderr
    assert "  os: module: re-import it" in p.stderr
    assert "_private" not in p.stderr
    out = pyc("run", b, "sorted(k for k in ('arr', 'ro', 'small', 'lam', 'os', '_private') if k in globals())",
              check=EXIT_OK).stdout
    assert out == "['arr', 'ro', 'small']\n"
    f = tmp_path / "ns.pkl"
    p = pyc("cp", "%s:" % a, str(f), check=EXIT_OK)
    assert "lam" in p.stderr
    with open(f, "rb") as fh:
        ns = pickle.load(fh)
    assert sorted(ns) == ["arr", "ro", "small"]


def test_cp_through_stdin_and_stdout(two):
    a, b = two
    blob = pyc_bytes("cp", "%s:small" % a, "-")
    assert pickle.loads(blob) == {"k": [1, 2]}
    p = subprocess.run([PYC_CLI, "cp", "-", "%s:piped" % b], input=blob, capture_output=True,
                       env=pyctest.child_env(), timeout=60)
    assert p.returncode == EXIT_OK, p.stderr
    assert pyc("run", b, "piped", check=EXIT_OK).stdout == "{'k': [1, 2]}\n"


def test_cp_errors(two, tmp_path):
    a, b = two
    p = pyc("cp", "%s:nope" % a, str(tmp_path / "x.pkl"), check=EXIT_REFUSED)
    assert "NameError" in p.stderr and not (tmp_path / "x.pkl").exists()
    p = pyc("cp", str(tmp_path / "missing.pkl"), "%s:x" % b, check=EXIT_NOINPUT)
    assert "cannot open" in p.stderr
    bad = tmp_path / "bad.pkl"
    bad.write_bytes(b"not a pickle")
    p = pyc("cp", str(bad), "%s:x" % b, check=EXIT_REFUSED)
    assert "UnpicklingError" in p.stderr or "Error" in p.stderr
    # a whole-namespace put needs a dict
    p = pyc("cp", str(_write(tmp_path / "list.pkl", [1])), "%s:" % b, check=EXIT_REFUSED)
    assert "dict" in p.stderr
    pyc("cp", "%s:1bad" % a, "x.pkl", check=EXIT_USAGE)
    pyc("cp", "Capital:x", "x.pkl", check=EXIT_USAGE)


def _write(path, obj):
    path.write_bytes(pickle.dumps(obj))
    return path


def pyc_bytes(*args):
    p = subprocess.run([PYC_CLI] + list(args), capture_output=True, env=pyctest.child_env(), timeout=60)
    assert p.returncode == EXIT_OK, p.stderr
    return p.stdout


def test_new_from_a_session_is_a_fork_with_new_s_options(sessions):
    """`pyc new NAME --from SOURCE`: NAME is a fork of the live session SOURCE (its state, then its own), made
    as `new` makes a session (refused when NAME lives, replaced with --replace, new's --json); options that
    choose a kernel or limits are refused, and so is a SOURCE that is neither a session nor a template."""
    base = sessions.new()
    pyc("run", base, "import decimal\nseed = 41", check=EXIT_OK)
    name = unique_name("from")
    p = pyc("new", name, "--from", base, check=EXIT_OK)
    sessions.adopt(name)
    assert p.stdout == session_file(name) + "\n" and p.stderr == ""
    assert pyc("run", name, "seed + 1, 'decimal' in __import__('sys').modules", check=EXIT_OK).stdout == "(42, True)\n"
    pyc("run", name, "seed = 0", check=EXIT_OK)
    assert pyc("run", base, "seed", check=EXIT_OK).stdout == "41\n"
    first = read_session(name)["pid"]
    pyc("new", name, "--from", base, check=EXIT_EXISTS)
    assert read_session(name)["pid"] == first
    record = json.loads(pyc("new", name, "--from", base, "--replace", "--json", check=EXIT_OK).stdout)
    assert record["name"] == name and record["pid"] != first and record["connection_file"] == session_file(name)
    assert wait_gone(first)
    assert pyc("run", name, "seed", check=EXIT_OK).stdout == "41\n"
    p = pyc("new", unique_name("from"), "--from", base, "--idle", "5", check=EXIT_USAGE)
    assert "takes only --replace and --json" in p.stderr
    p = pyc("new", unique_name("from"), "--from", unique_name("none"), check=EXIT_NOSESSION)
    assert "no session and no live template named" in p.stderr
