"""`pyc fire` and `pyc poll`: a cell that outlives the command that started it, followed later from other
processes through the kernel's journal (README, "Fire and poll")."""

import json
import subprocess
import sys
import time

import pyctest
from clitest import (EXIT_ERROR, EXIT_LOST, EXIT_NOINPUT, EXIT_NOSESSION, EXIT_OK, EXIT_PENDING, EXIT_REFUSED,
                     EXIT_TIMEOUT, EXIT_USAGE, PYC_CLI, pyc, read_session, session_file)



def fire(name, code, *extra, check=EXIT_OK):
    p = pyc("fire", name, code, *extra, check=check)
    return p.stdout.strip()


def poll(name, *args, check=None):
    return pyc("poll", name, *args, check=check)


def test_fire_returns_at_once_and_poll_follows(sessions):
    name = sessions.new()
    t0 = time.monotonic()
    cell_id = fire(name, "import time\nprint('start', flush=True)\ntime.sleep(3)\nprint('end')\n6 * 7")
    assert time.monotonic() - t0 < 2.5, "fire waited for the cell"
    assert len(cell_id) > 10 and "\n" not in cell_id
    p = poll(name, cell_id, check=EXIT_PENDING)
    assert p.stdout.strip() in ("queued", "running")
    p = poll(name, cell_id, "--json", check=EXIT_PENDING)
    line, outcome = [json.loads(x) for x in p.stdout.splitlines()]
    assert line["type"] == "state" and line["id"] == cell_id and line["state"] in ("queued", "running")
    assert outcome == {"type": "outcome", "outcome": "pending", "exit": EXIT_PENDING, "by": "pyc", "message": None}
    p = poll(name, cell_id, "--wait", check=EXIT_OK)
    assert p.stdout == "start\nend\n42\n"
    # done cells can be polled again, from any process, as often as one likes
    p = poll(name, cell_id, "--json", check=EXIT_OK)
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [x["type"] for x in lines] == ["stream", "stream", "execute_result", "execute_reply", "outcome"]
    assert lines[-1]["outcome"] == "ok" and lines[-1]["by"] == "cell"
    assert lines[-2]["content"]["status"] == "ok"
    assert lines[-2]["metadata"]["pyc"]["outcome"] == "ok"


def test_fired_cells_queue_in_order_behind_a_running_one(sessions):
    name = sessions.new()
    busy = fire(name, "import time\ntime.sleep(2)")
    ids = [fire(name, "order = globals().get('order', []) + [%d]\nprint(order)" % i) for i in range(3)]
    states = [poll(name, i, check=EXIT_PENDING).stdout.strip() for i in ids]
    assert states == ["queued"] * 3
    assert poll(name, ids[-1], "--wait=30", check=EXIT_OK).stdout == "[0, 1, 2]\n"
    assert poll(name, busy, check=EXIT_OK).stdout == ""
    assert poll(name, ids[0], check=EXIT_OK).stdout == "[0]\n"


def test_exit_codes_are_runs(sessions):
    name = sessions.new()
    failed = fire(name, "print('before')\n1/0")
    p = poll(name, failed, "--wait", check=EXIT_ERROR)
    assert p.stdout == "before\n" and "ZeroDivisionError" in p.stderr
    slow = fire(name, "import time\ntime.sleep(30)", "--timeout", "1")
    p = poll(name, slow, "--wait=30", check=EXIT_TIMEOUT)
    assert "CellTimeout" in p.stderr
    isolated = fire(name, "import os\nchild_pid = os.getpid()\nprint(child_pid != %d)" % read_session(name)["pid"],
                    "--isolate")
    assert poll(name, isolated, "--wait=30", check=EXIT_OK).stdout == "True\n"


def test_a_wait_that_runs_out(sessions):
    name = sessions.new()
    cell_id = fire(name, "import time\ntime.sleep(20)")
    t0 = time.monotonic()
    poll(name, cell_id, "--wait=0.5", check=EXIT_PENDING)
    assert time.monotonic() - t0 < 5
    pyc("int", name, check=EXIT_OK)
    assert "KeyboardInterrupt" in poll(name, cell_id, "--wait=30", check=EXIT_ERROR).stderr


def test_code_from_stdin_and_file(sessions, tmp_path):
    name = sessions.new()
    p = subprocess.run([PYC_CLI, "fire", name, "-"], input="print('from stdin')\n", capture_output=True, text=True,
                       env=pyctest.child_env(), timeout=60)
    assert p.returncode == EXIT_OK, p.stderr
    assert poll(name, p.stdout.strip(), "--wait", check=EXIT_OK).stdout == "from stdin\n"
    script = tmp_path / "cell.py"
    script.write_text("print('from file')\n")
    assert poll(name, fire(name, "@%s" % script), "--wait", check=EXIT_OK).stdout == "from file\n"
    assert "cannot open" in pyc("fire", name, "@%s" % (tmp_path / "missing.py"), check=EXIT_NOINPUT).stderr


def test_any_clients_cell_can_be_polled_after_that_client_died(sessions):
    """A cell sent by a jupyter_client whose process then died (as an agent's might) is in the journal by its
    msg_id."""
    name = sessions.new()
    script = (
        "import json, os, sys\n"
        "from jupyter_client import BlockingKernelClient\n"
        "kc = BlockingKernelClient()\n"
        "kc.load_connection_info(json.load(open(sys.argv[1])))\n"
        "kc.start_channels()\n"
        "kc.wait_for_ready(timeout=30)\n"
        "msg_id = kc.execute('import time\\ntime.sleep(1)\\nprint(\"orphan done\")')\n"
        "while True:  # the cell has begun: the client dies in the middle of it\n"
        "    m = kc.get_iopub_msg(timeout=30)\n"
        "    if m['msg_type'] == 'execute_input' and m['parent_header'].get('msg_id') == msg_id:\n"
        "        break\n"
        "print(msg_id, flush=True)\n"
        "os._exit(0)\n"
    )
    p = subprocess.run([sys.executable, "-c", script, session_file(name)], capture_output=True, text=True,
                       timeout=60, env=pyctest.child_env())
    assert p.returncode == 0, p.stderr
    msg_id = p.stdout.strip()
    assert poll(name, msg_id, "--wait=30", check=EXIT_OK).stdout == "orphan done\n"


def test_listing_and_unknown_ids(sessions):
    name = sessions.new()
    a = fire(name, "1")
    poll(name, a, "--wait", check=EXIT_OK)
    b = fire(name, "1/0")
    poll(name, b, "--wait", check=EXIT_ERROR)
    p = poll(name, check=EXIT_OK)
    rows = [line.split() for line in p.stdout.splitlines()]
    assert [r[0] for r in rows][-2:] == [a, b]
    assert rows[-2][1:3] == ["done", "ok"] and rows[-1][1:3] == ["done", "error"]
    cells = [json.loads(x) for x in poll(name, "--json", check=EXIT_OK).stdout.splitlines()]
    assert [c["id"] for c in cells][-2:] == [a, b]
    p = poll(name, "no-such-cell", check=EXIT_NOSESSION)
    assert "no cell no-such-cell" in p.stderr
    assert poll(name, a, "--wait=abc", check=EXIT_USAGE).returncode == EXIT_USAGE
    pyc("fire", name, check=EXIT_USAGE)


def test_fire_to_a_session_without_journal(sessions, monkeypatch):
    monkeypatch.setenv("PYC_JOURNAL_CELLS", "0")
    name = sessions.new()
    monkeypatch.delenv("PYC_JOURNAL_CELLS")
    p = pyc("fire", name, "print('still runs')", check=EXIT_REFUSED)
    assert "keeps no journal" in p.stderr
    assert pyc("run", name, "'alive'", check=EXIT_OK).stdout == "'alive'\n"


def test_no_session(sessions):
    assert pyc("fire", "nobody-here", "1", check=EXIT_NOSESSION).returncode == EXIT_NOSESSION
    assert pyc("poll", "nobody-here", "x", check=EXIT_NOSESSION).returncode == EXIT_NOSESSION


def test_poll_after_the_kernel_died(sessions):
    """The journal goes with the kernel; poll then answers from the event log: a cell that had ended, one the
    crash took (exit 7, the reason and the traceback), one it never heard of."""
    name = sessions.new()
    before = fire(name, "x = 1")
    poll(name, before, "--wait", check=EXIT_OK)
    crash = fire(name, "import ctypes, time\ntime.sleep(0.3)\nctypes.string_at(0)")
    p = poll(name, crash, "--wait=30", check=EXIT_LOST)
    # from the journal (the crash reporter's KernelDied reply reached it before the kernel ended) or, once the
    # kernel is gone, from the event log
    assert ("KernelDied" in p.stderr or "crashed (SIGSEGV)" in p.stderr) and "string_at" in p.stderr
    deadline = time.monotonic() + 10
    while "crashed" not in pyc("ls").stdout and time.monotonic() < deadline:
        time.sleep(0.1)
    p = poll(name, crash, check=EXIT_LOST)
    assert "crashed (SIGSEGV)" in p.stderr and "string_at" in p.stderr
    p = poll(name, before, check=EXIT_OK)
    assert "outcome ok" in p.stderr and "its output went with the kernel" in p.stderr
    assert "has no cell" in poll(name, "never-fired", check=EXIT_NOSESSION).stderr


def test_poll_after_new_replace_names_the_replacement(sessions):
    """A cell of the kernel that `pyc new --replace` replaced is not blamed on the journal's size: poll says the
    session's kernel was replaced, with the cell's outcome."""
    name = sessions.new()
    done = fire(name, "x = 1")
    poll(name, done, "--wait", check=EXIT_OK)
    running = fire(name, "import time\ntime.sleep(60)")
    deadline = time.monotonic() + 10
    while poll(name, running).stdout.strip() != "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    sessions.new(name, "--replace")
    p = poll(name, done, check=EXIT_OK)
    assert "earlier kernel of session %s" % name in p.stderr and "replaced" in p.stderr, p.stderr
    assert "outcome ok" in p.stderr and "journal" not in p.stderr, p.stderr
    # the replacement shut the old kernel down, which interrupted the running cell first
    p = poll(name, running, check=EXIT_ERROR)
    assert "outcome interrupted" in p.stderr and "replaced" in p.stderr, p.stderr
    # a cell no kernel of the name ran is still unknown
    p = poll(name, "never-fired", check=EXIT_NOSESSION)
    assert "no cell never-fired" in p.stderr and "replaced" not in p.stderr


def test_poll_says_what_an_isolated_cell_did_not_merge_back(sessions):
    """poll of a done isolated cell prints the "not merged back" line that run prints."""
    name = sessions.new()
    cell = fire(name, "gen = (i for i in [1])\nfine = 3", "--isolate")
    p = poll(name, cell, "--wait", check=EXIT_OK)
    assert "not merged back" in p.stderr and "gen" in p.stderr, p.stderr
    assert pyc("run", name, "fine", check=EXIT_OK).stdout == "3\n"
