"""`pyc snapshot`, `pyc snapshots` and `pyc undo` (README, "Time travel"), through the built pyc: a session
goes back to a snapshot and stays the same session (its pid, its file); bad arguments and unknown snapshots
are refused with an exit code, and the session goes on."""

import json

import pyctest
from clitest import EXIT_NOSESSION, EXIT_REFUSED, EXIT_OK, EXIT_USAGE, pyc, read_session, unique_name


def test_snapshot_undo_and_list(sessions):
    name = sessions.new()
    pid = read_session(name)["pid"]
    pyc("run", name, "data = [1]", check=EXIT_OK)
    assert pyc("snapshot", name, check=EXIT_OK).stdout == "snapshot-1\n"
    pyc("run", name, "data.append(2)", check=EXIT_OK)
    record = json.loads(pyc("snapshot", name, "two", "--json", check=EXIT_OK).stdout)
    pyctest.register_pid(record["pid"])
    assert record["name"] == "two" and record["execution_count"] == 2
    pyc("run", name, "data.append(3); del data", check=EXIT_OK)
    listing = pyc("snapshots", name, check=EXIT_OK).stdout.splitlines()
    assert listing[0].startswith("snapshot-1") and " -2 " in listing[0] and "In[1]" in listing[0]
    assert listing[1].startswith("two") and " -1 " in listing[1]
    # undo: the newest by default, then by count, then by name; the session stays the same process
    out = pyc("undo", name, check=EXIT_OK).stdout
    assert "back to two" in out
    assert pyc("run", name, "data", check=EXIT_OK).stdout == "[1, 2]\n"
    pyc("undo", name, "2", check=EXIT_OK)
    assert pyc("run", name, "data", check=EXIT_OK).stdout == "[1]\n"
    pyc("undo", name, "two", check=EXIT_OK)
    assert pyc("run", name, "data", check=EXIT_OK).stdout == "[1, 2]\n"
    assert read_session(name)["pid"] == pid and pyctest.pid_alive(pid)
    answer = json.loads(pyc("snapshots", name, "--json", check=EXIT_OK).stdout)
    for s in answer["snapshots"]:
        pyctest.register_pid(s["pid"])
    pyctest.register_pid(answer["pid"])
    assert [s["name"] for s in answer["snapshots"]] == ["snapshot-1", "two"]
    assert answer["restored"]["name"] == "two"
    # the execution count went on
    status = json.loads(pyc("status", name, check=EXIT_OK).stdout)
    assert status["execution_count"] == 6


def test_refusals(sessions):
    name = sessions.new()
    p = pyc("undo", name, check=EXIT_REFUSED)
    assert "no snapshot -1" in p.stderr
    p = pyc("undo", name, "0", check=EXIT_USAGE)
    assert "from 1" in p.stderr
    p = pyc("undo", name, "nothere", check=EXIT_REFUSED)
    assert "no snapshot nothere" in p.stderr
    pyc("snapshots", unique_name("missing"), check=EXIT_NOSESSION)
    pyc("snapshot", name, "a", "b", check=EXIT_USAGE)
    assert pyc("snapshots", name, check=EXIT_OK).stdout.startswith("no snapshots")
    assert pyc("run", name, "1 + 1", check=EXIT_OK).stdout == "2\n"
