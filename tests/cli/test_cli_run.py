"""`pyc run`, `status`, `vars`, `complete`, `int`: one-shot requests to a live session, through the built pyc."""

import json
import signal
import subprocess
import time

import pyctest
from clitest import (EXIT_ERROR, EXIT_INTERRUPTED, EXIT_IOERR, EXIT_LOST, EXIT_NOINPUT, EXIT_OK, EXIT_PIPE,
                     EXIT_TIMEOUT, PYC_CLI, pyc, read_session, wait_gone)


def test_streams_and_result(shared):
    p = pyc("run", shared, "import sys\nprint('to out')\nprint('to err', file=sys.stderr)\n6 * 7", check=EXIT_OK)
    assert p.stdout == "to out\n42\n"
    assert p.stderr == "to err\n"


def test_result_only_for_a_trailing_expression(shared):
    assert pyc("run", shared, "q = 1", check=EXIT_OK).stdout == ""
    assert pyc("run", shared, "q + 1;", check=EXIT_OK).stdout == ""
    assert pyc("run", shared, "'text'", check=EXIT_OK).stdout == "'text'\n"


def test_error_exit_code_and_traceback(shared):
    p = pyc("run", shared, "def boom():\n    return 1 / 0\nboom()", check=EXIT_ERROR)
    assert p.stdout == ""
    assert "ZeroDivisionError: division by zero" in p.stderr
    assert "boom" in p.stderr
    # the kernel colors its tracebacks as IPython does; pyc prints them plain when stderr is not a terminal
    assert "\x1b" not in p.stderr and "----> 3" in p.stderr
    # the session goes on
    assert pyc("run", shared, "'alive'", check=EXIT_OK).stdout == "'alive'\n"
    p = pyc("run", shared, "def f(:\n    pass", check=EXIT_ERROR)
    assert "SyntaxError" in p.stderr


def test_code_from_file_and_stdin(shared, tmp_path):
    script = tmp_path / "cell.py"
    script.write_text("from_file = [1, 2, 3]\nprint(sum(from_file))\n")
    assert pyc("run", shared, "@%s" % script, check=EXIT_OK).stdout == "6\n"
    assert pyc("run", shared, "-", input="print(len(from_file) * 10)\n", check=EXIT_OK).stdout == "30\n"
    # a local file that cannot be read is pyc's own EXIT_NOINPUT, as README says (not a usage error, and not 1,
    # which is a cell that raised)
    p = pyc("run", shared, "@%s" % (tmp_path / "missing.py"), check=EXIT_NOINPUT)
    assert "cannot open" in p.stderr
    # a decorator line is code, not a file: "@" with a newline after it
    p = pyc("run", shared, "@staticmethod\ndef deco():\n    pass\ntype(deco).__name__", check=EXIT_OK)
    assert p.stdout == "'staticmethod'\n"


def test_json_lines(shared):
    p = pyc("run", shared, "print('a')\ndisplay({'k': 1})\n'b'", "--json", check=EXIT_OK)
    lines = [json.loads(l) for l in p.stdout.splitlines()]
    types = [l["type"] for l in lines]
    assert types == ["stream", "display_data", "execute_result", "execute_reply", "outcome"], types
    assert lines[-1] == {"type": "outcome", "outcome": "ok", "exit": 0, "by": "cell", "message": None}
    assert lines[0]["content"] == {"name": "stdout", "text": "a\n"}
    assert lines[1]["content"]["data"]["text/plain"] == "{'k': 1}"
    assert lines[2]["content"]["data"]["text/plain"] == "'b'"
    reply = lines[-2]
    assert reply["content"]["status"] == "ok" and isinstance(reply["content"]["execution_count"], int)
    assert "metadata" in reply
    # an error in JSON mode: the error message, then the reply; exit 1
    p = pyc("run", shared, "raise KeyError('zz')", "--json", check=EXIT_ERROR)
    lines = [json.loads(l) for l in p.stdout.splitlines()]
    assert [l["type"] for l in lines] == ["error", "execute_reply", "outcome"]
    assert lines[2] == {"type": "outcome", "outcome": "raised", "exit": EXIT_ERROR, "by": "cell", "message": None}
    assert lines[0]["content"]["ename"] == "KeyError"
    assert lines[1]["content"]["status"] == "error"


def test_options_after_the_code_and_double_dash(shared):
    assert pyc("run", shared, "1 + 1", "--json", check=EXIT_OK).stdout.count("\n") == 3
    assert pyc("run", shared, "--", "--1", check=EXIT_OK).stdout == "1\n"


def test_timeout_is_the_cells_deadline(shared):
    """The per-cell deadline: metadata {"pyc": {"timeout": S}} is kept by the kernel (issue 5 side).  The cell
    ends with CellTimeout and pyc exits 5; the session goes on."""
    t0 = time.monotonic()
    p = pyc("run", shared, "import time\ntime.sleep(30)", "--timeout", "1", timeout=60)
    elapsed = time.monotonic() - t0
    assert p.returncode == EXIT_TIMEOUT, (p.returncode, p.stderr)
    assert "CellTimeout" in p.stderr
    assert elapsed < 15, elapsed
    assert pyc("run", shared, "'after'", check=EXIT_OK).stdout == "'after'\n"
    # --json: the reply's metadata says what happened
    p = pyc("run", shared, "import time\ntime.sleep(30)", "--timeout", "0.5", "--json", timeout=60)
    assert p.returncode == EXIT_TIMEOUT
    reply, outcome = [json.loads(x) for x in p.stdout.splitlines()[-2:]]
    assert outcome["outcome"] == "timeout" and outcome["exit"] == EXIT_TIMEOUT and outcome["by"] == "pyc"
    assert reply["type"] == "execute_reply" and reply["content"]["ename"] == "CellTimeout"
    assert reply["metadata"]["pyc"]["timed_out"] is True


def test_isolate(shared):
    pyc("run", shared, "iso_kept = 1", check=EXIT_OK)
    p = pyc("run", shared, "iso_new = iso_kept + 1\nprint('in child')", "--isolate", check=EXIT_OK)
    assert p.stdout == "in child\n"
    assert pyc("run", shared, "iso_new", check=EXIT_OK).stdout == "2\n"      # merged back
    # a deadline kills only the child; the kernel's state is as it was
    p = pyc("run", shared, "iso_lost = 1\nimport time\ntime.sleep(30)", "--isolate", "--timeout", "1", timeout=60)
    assert p.returncode == EXIT_TIMEOUT, (p.returncode, p.stderr)
    assert "CellTimeout" in p.stderr
    assert pyc("run", shared, "'iso_lost' in dir()", check=EXIT_OK).stdout == "False\n"


def test_isolate_says_what_was_not_merged_back(shared):
    """Names an isolated cell bound that cannot come back are named on stderr, one line, with why; --json
    leaves that to the reply's metadata."""
    p = pyc("run", shared, "import json as iso_mod\niso_gen = (i for i in [1])\niso_fine = 3", "--isolate",
            check=EXIT_OK)
    lines = [line for line in p.stderr.splitlines() if "not merged back" in line]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("pyc: not merged back (cannot be pickled): ")
    assert "iso_gen (generator)" in lines[0] and "iso_mod (module: re-import it)" in lines[0]
    assert "iso_fine" not in lines[0]
    assert pyc("run", shared, "iso_fine", check=EXIT_OK).stdout == "3\n"
    p = pyc("run", shared, "iso_gen2 = (i for i in [1])", "--isolate", "--json", check=EXIT_OK)
    assert "not merged back" not in p.stderr
    assert "iso_gen2" in json.loads(p.stdout.splitlines()[-2])["metadata"]["pyc"]["skipped"]
    # nothing to say: nothing said
    assert pyc("run", shared, "iso_fine2 = 1", "--isolate", check=EXIT_OK).stderr == ""


def _wait_busy(name, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if json.loads(pyc("status", name, check=EXIT_OK).stdout)["state"] == "busy":
            return True
        time.sleep(0.05)
    return False


def test_status(shared):
    pyc("run", shared, "status_probe = 1", check=EXIT_OK)
    st = json.loads(pyc("status", shared, check=EXIT_OK).stdout)
    assert st["name"] == shared
    assert st["pid"] == read_session(shared)["pid"]
    assert st["state"] == "idle"
    assert isinstance(st["execution_count"], int) and st["execution_count"] >= 1
    assert st["uptime"] > 0
    assert st["memory"]["rss"] > 1 << 20
    assert st["connection_file"].endswith("pyc-%s.json" % shared)
    before = st["execution_count"]
    pyc("run", shared, "None", check=EXIT_OK)
    assert json.loads(pyc("status", shared, check=EXIT_OK).stdout)["execution_count"] == before + 1
    # busy while a cell runs
    runner = subprocess.Popen([PYC_CLI, "run", shared, "import time\ntime.sleep(3)"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=pyctest.child_env())
    try:
        assert _wait_busy(shared), "status never said busy while a cell ran"
    finally:
        runner.communicate(timeout=30)
    assert json.loads(pyc("status", shared, check=EXIT_OK).stdout)["state"] == "idle"


def test_vars(shared):
    pyc("run", shared, "import math\nv_int = 1\nv_list = [1]\n_v_hidden = 2\ndef v_fn(): pass\nclass VCls: pass\n"
                       "v_obj = VCls()", check=EXIT_OK)
    entries = json.loads(pyc("vars", shared, check=EXIT_OK).stdout)
    types = {e["name"]: e["type"] for e in entries}
    assert types["v_int"] == "int"
    assert types["v_list"] == "list"
    assert types["math"] == "module"
    assert types["v_fn"] == "function"
    assert types["VCls"] == "type"
    assert types["v_obj"] == "__main__.VCls"
    assert "_v_hidden" not in types
    assert not [n for n in types if n.startswith("_")]
    assert [e["name"] for e in entries] == sorted(e["name"] for e in entries)


def test_vars_with_shadowed_builtins(sessions):
    """The listing looks up no global name: a user who rebinds builtins (even __import__ and globals) still
    gets it."""
    name = sessions.new()
    pyc("run", name, "type = 'A'\nlist = [1]\nsorted = isinstance = getattr = repr = str = 0\n"
                     "__import__ = globals = None\njson = types = 'shadowed'\ndict = len = dir = vars = 0",
        check=EXIT_OK)
    entries = json.loads(pyc("vars", name, check=EXIT_OK).stdout)
    types = {e["name"]: e["type"] for e in entries}
    assert types["type"] == "str" and types["list"] == "list" and types["sorted"] == "int"
    assert types["json"] == "str" and types["globals"] == "NoneType"
    assert [e["name"] for e in entries] == [
        "dict", "dir", "getattr", "globals", "isinstance", "json", "len", "list", "repr", "sorted", "str", "type",
        "types", "vars"]


def test_complete(shared):
    pyc("run", shared, "complete_me_please = 1", check=EXIT_OK)
    p = pyc("complete", shared, "complete_me_", check=EXIT_OK)
    assert "complete_me_please" in p.stdout.splitlines()
    p = pyc("complete", shared, "import mat", check=EXIT_OK)
    assert any(l.endswith("math") for l in p.stdout.splitlines()), p.stdout
    reply = json.loads(pyc("complete", shared, "complete_me_", "--json", check=EXIT_OK).stdout)
    assert "complete_me_please" in reply["matches"]
    assert reply["cursor_end"] == len("complete_me_")


def test_interrupt_with_pyc_int(shared):
    runner = subprocess.Popen([PYC_CLI, "run", shared, "import time\ntime.sleep(30)"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=pyctest.child_env())
    try:
        assert _wait_busy(shared)
        pyc("int", shared, check=EXIT_OK)
        out, err = runner.communicate(timeout=20)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == EXIT_ERROR, (runner.returncode, err)
    assert "KeyboardInterrupt" in err
    assert pyc("run", shared, "'next'", check=EXIT_OK).stdout == "'next'\n"


def test_an_isolated_cell_stopped_by_pyc_int_says_it_was_interrupted(shared):
    """`pyc int` stops an isolated cell by ending its child: its metadata says interrupted, as the outcome does."""
    runner = subprocess.Popen([PYC_CLI, "run", shared, "--isolate", "--json", "import time\ntime.sleep(30)"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=pyctest.child_env())
    try:
        assert _wait_busy(shared)
        pyc("int", shared, check=EXIT_OK)
        out, err = runner.communicate(timeout=20)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == EXIT_ERROR, (runner.returncode, err)
    reply = [json.loads(l) for l in out.splitlines()][-2]
    pm = reply["metadata"]["pyc"]
    assert pm["outcome"] == "interrupted" and pm["interrupted"] is True and pm["isolated"] == "fork", pm
    assert pyc("run", shared, "'next'", check=EXIT_OK).stdout == "'next'\n"


def test_what_a_thread_printed_after_its_cell_reaches_the_next_run(sessions):
    """Output a thread prints after its cell ended reaches the next `pyc run`, once, after a line that names
    the cell (--json: late_output lines before the reply), as a notebook shows it under the cell."""
    name = sessions.new()
    pyc("run", name, "import threading\ngo, done = threading.Event(), threading.Event()\n"
                     "def f():\n    go.wait(); print('from the thread'); done.set()\n"
                     "threading.Thread(target=f).start()", check=EXIT_OK)
    p = pyc("run", name, "go.set(); done.wait(10); print('own')", check=EXIT_OK)
    assert p.stdout == "own\nfrom the thread\n", p.stdout
    assert "pyc: output of cell In [1] (" in p.stderr and "after it ended" in p.stderr, p.stderr
    p = pyc("run", name, "print('again')", check=EXIT_OK)          # shown once
    assert p.stdout == "again\n" and p.stderr == "", p
    pyc("run", name, "go.clear(); done.clear()\nthreading.Thread(target=f).start()", check=EXIT_OK)
    lines = [json.loads(l) for l in pyc("run", name, "go.set(); done.wait(10); 0", "--json",
                                        check=EXIT_OK).stdout.splitlines()]
    assert [l["type"] for l in lines] == ["execute_result", "late_output", "execute_reply", "outcome"], lines
    late = lines[1]
    assert late["execution_count"] == 4 and late["output"]["type"] == "stream", late
    assert late["output"]["content"]["text"] == "from the thread\n"


def test_ctrl_c_interrupts_the_cell(shared):
    runner = subprocess.Popen([PYC_CLI, "run", shared, "import time\ntime.sleep(30)"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=pyctest.child_env())
    try:
        assert _wait_busy(shared)
        runner.send_signal(signal.SIGINT)
        out, err = runner.communicate(timeout=20)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == EXIT_INTERRUPTED, (runner.returncode, err)
    assert "KeyboardInterrupt" in err
    assert pyc("run", shared, "'still here'", check=EXIT_OK).stdout == "'still here'\n"


def test_input_is_refused_in_run(shared):
    p = pyc("run", shared, "input('x? ')", check=EXIT_ERROR)
    assert "Error" in p.stderr


def test_a_dying_kernel_ends_the_wait(sessions):
    """The kernel's process ends during the cell: the session is lost, exit 7."""
    name = sessions.new()
    pid = read_session(name)["pid"]
    t0 = time.monotonic()
    p = pyc("run", name, "import os, time\ntime.sleep(0.2)\nos._exit(3)", timeout=60)
    assert p.returncode == EXIT_LOST, (p.returncode, p.stderr)
    assert "the kernel (pid %d) died during the cell" % pid in p.stderr
    assert time.monotonic() - t0 < 10
    assert wait_gone(pid)


def test_full_stdout_is_an_error(shared):
    """A write error on stdout is reported (one "pyc: " line) and makes the exit code EXIT_IOERR."""
    for args in (("run", shared, "print(1)"), ("run", shared, "print(1)", "--json"), ("ls",), ("vars", shared),
                 ("status", shared)):
        with open("/dev/full", "w") as full:
            p = subprocess.run([PYC_CLI] + list(args), stdout=full, stderr=subprocess.PIPE, text=True,
                               env=pyctest.child_env(), timeout=30)
        assert p.returncode == EXIT_IOERR, (args, p.returncode, p.stderr)
        assert p.stderr.count("pyc: ") == 1 and "cannot write to stdout: No space left" in p.stderr, (args, p.stderr)
    # a cell that raised keeps its own exit code
    with open("/dev/full", "w") as full:
        p = subprocess.run([PYC_CLI, "run", shared, "print(1)\n1/0"], stdout=full, stderr=subprocess.PIPE,
                           text=True, env=pyctest.child_env(), timeout=30)
    assert p.returncode == EXIT_ERROR and "ZeroDivisionError" in p.stderr and "cannot write" in p.stderr


def test_closed_stdout_ends_run_quietly(sessions):
    """`pyc run ... | head -1`: once the reader is gone pyc stops at once, silently, with 141 (128 + SIGPIPE,
    as the shell reports a tool killed by SIGPIPE); the cell goes on in the session."""
    name = sessions.new()
    code = "import time\nfor i in range(300):\n    print(i, flush=True)\n    time.sleep(0.1)"
    p = subprocess.Popen([PYC_CLI, "run", name, code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=pyctest.child_env())
    try:
        assert p.stdout.readline() == b"0\n"
        p.stdout.close()
        t0 = time.monotonic()
        rc = p.wait(timeout=10)
        assert time.monotonic() - t0 < 5
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == EXIT_PIPE, rc
    assert p.stderr.read() == b""
    assert _wait_busy(name), "the cell did not go on"
    pyc("int", name, check=EXIT_OK)
    # (once the interrupted cell has ended: a cell queued behind it would be aborted)
    deadline = time.monotonic() + 10
    while json.loads(pyc("status", name, check=EXIT_OK).stdout)["state"] != "idle" and time.monotonic() < deadline:
        time.sleep(0.05)
    # the same through a shell pipeline
    sh = subprocess.run(["/bin/bash", "-c", "set -o pipefail; %s run %s 'for i in range(10**6): print(i)' | head -1"
                         % (PYC_CLI, name)], capture_output=True, text=True, env=pyctest.child_env(), timeout=30)
    assert sh.stdout == "0\n" and sh.returncode == EXIT_PIPE and sh.stderr == "", sh
    pyc("int", name, check=EXIT_OK)


def test_large_output(shared):
    p = pyc("run", shared, "for i in range(20000): print(i)", check=EXIT_OK)
    lines = p.stdout.splitlines()
    assert lines[0] == "0" and lines[-1] == "19999" and len(lines) == 20000


def test_unicode(shared):
    p = pyc("run", shared, "s = 'héllo ☃'\nprint(s)\ns", check=EXIT_OK)
    assert p.stdout == "héllo ☃\n'héllo ☃'\n"


def test_result_starts_its_own_line(shared):
    assert pyc("run", shared, "print('partial', end='')\n7", check=EXIT_OK).stdout == "partial\n7\n"
