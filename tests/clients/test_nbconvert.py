"""Batch clients: `jupyter nbconvert --execute` on examples/quickstart.ipynb, and nbclient directly."""

import os
import re
import shutil
import subprocess
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from pyctest import (
    IS_PYC,
    NOT_PYC_REASON,
    PYC_PYTHON,
    PYC_SRCDIR,
    child_env,
    descendants_of,
    kill_pid,
    pid_alive,
    register_pid,
)

QUICKSTART = os.path.join(PYC_SRCDIR, "examples", "quickstart.ipynb")
ECOSYSTEM = os.path.join(PYC_SRCDIR, "examples", "ecosystem.ipynb")
TIMETRAVEL = os.path.join(PYC_SRCDIR, "examples", "timetravel.ipynb")
IPYTHON_INPUT = os.path.join(PYC_SRCDIR, "examples", "ipython_input.ipynb")

# (source prefix, expected outputs as (output_type, name-or-mime, text))
EXPECTED = [
    ('print("Hello from pyc!")', [("stream", "stdout", "Hello from pyc!\n")]),
    ("x = 6", [("execute_result", "text/plain", "42")]),
    ("for i in range(3)", [("stream", "stdout", "line 0\nline 1\nline 2\n")]),
    ("def greet", []),
    ('greet("Jupyter")', [("execute_result", "text/plain", "'Hello, Jupyter!'")]),
    ("try:", [("stream", "stdout", "caught: division by zero\n")]),
    ("import sys", [("stream", "stderr", "a warning on stderr\n")]),
    ("import math", [("execute_result", "text/plain", "409114")]),
]


def simplify(outputs):
    out = []
    for o in outputs:
        if o["output_type"] == "stream":
            if out and out[-1][0] == "stream" and out[-1][1] == o["name"]:
                out[-1] = ("stream", o["name"], out[-1][2] + o["text"])
            else:
                out.append(("stream", o["name"], o["text"]))
        elif o["output_type"] in ("execute_result", "display_data"):
            out.append((o["output_type"], "text/plain", o["data"].get("text/plain")))
        else:
            out.append((o["output_type"], o.get("ename"), o.get("evalue")))
    return out


def run_watched(argv, timeout, **kw):
    """Run a client process; every process under it (its kernel) is recorded while it runs and killed by
    pid at the end if it outlived the client."""
    p = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=child_env(), **kw
    )
    register_pid(p.pid)
    seen = set()
    deadline = time.monotonic() + timeout
    try:
        while p.poll() is None and time.monotonic() < deadline:
            for c in descendants_of(p.pid):
                if c not in seen:
                    seen.add(c)
                    register_pid(c)
            time.sleep(0.05)
        if p.poll() is None:
            kill_pid(p.pid)
            out = p.communicate(timeout=10)[0]
            pytest.fail("%s did not finish within %ss:\n%s" % (argv, timeout, out.decode(errors="replace")))
        out = p.communicate(timeout=10)[0]
    finally:
        kill_pid(p.pid)
        late = [c for c in seen if pid_alive(c)]
        if late:
            time.sleep(2)  # let a kernel that is on its way out go by itself
        for c in seen:
            kill_pid(c)
    return p.returncode, out.decode("utf-8", "replace")


def test_quickstart_notebook_is_valid():
    nb = nbformat.read(QUICKSTART, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code) == len(EXPECTED)
    for cell, (prefix, _) in zip(code, EXPECTED):
        assert cell.source.startswith(prefix), (cell.source, prefix)


@pytest.mark.timeout(180)
def test_nbconvert_execute_quickstart(tmp_path):
    argv = [
        # Debian's python3-nbconvert has no jupyter-nbconvert script, so `python3 -m jupyter nbconvert`
        # fails there; the module entry point works everywhere.
        PYC_PYTHON, "-m", "nbconvert",
        "--to", "notebook", "--execute",
        "--ExecutePreprocessor.kernel_name=pyc",
        "--ExecutePreprocessor.timeout=60",
        "--output-dir", str(tmp_path),
        QUICKSTART,
    ]
    code, out = run_watched(argv, timeout=150)
    assert code == 0, out
    result = tmp_path / "quickstart.ipynb"
    assert result.exists(), out
    nb = nbformat.read(str(result), as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["language_info"]["name"] == "python"
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    for n, (cell, (prefix, expected)) in enumerate(zip(code_cells, EXPECTED), start=1):
        assert cell.source.startswith(prefix)
        assert simplify(cell.outputs) == expected, (cell.source, cell.outputs)
        assert cell.execution_count == n, (cell.source, cell.execution_count)
        for o in cell.outputs:
            if o["output_type"] == "execute_result":
                assert o["execution_count"] == n


def _client(nb, **kw):
    from nbclient import NotebookClient

    client = NotebookClient(nb, kernel_name="pyc", timeout=60, startup_timeout=60, **kw)
    pids = []

    def on_start(notebook=None, **_):
        pid = client.km.provisioner.process.pid
        pids.append(pid)
        register_pid(pid)

    client.on_notebook_start = on_start
    return client, pids


def _finish(pids):
    for pid in pids:
        deadline = time.monotonic() + 5
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        kill_pid(pid)


def error_notebook():
    return new_notebook(
        cells=[
            new_code_cell("a = 1\nprint('before', a)"),
            new_code_cell("1 / 0"),
            new_code_cell("print('after', a)"),
        ]
    )


def execute_example(source, tmp_path, cell_timeout):
    """Runs a copy of an example notebook in tmp_path with `jupyter nbconvert --execute` on the pyc kernelspec
    and returns the executed notebook (asserting nbconvert succeeded)."""
    nb_path = tmp_path / os.path.basename(source)
    shutil.copy(source, nb_path)
    rc, out = run_watched(
        [PYC_PYTHON, "-m", "nbconvert", "--to", "notebook", "--execute", "--inplace",
         "--ExecutePreprocessor.kernel_name=pyc", "--ExecutePreprocessor.timeout=%d" % cell_timeout, str(nb_path)],
        timeout=2 * cell_timeout,
    )  # fmt: skip
    # The exception's line first: a failure's summary (CI's) shows only the first line of the message.
    errors = [line for line in out.splitlines() if re.match(r"^[\w.]+(Error|Exception): ", line)]
    assert rc == 0, "%s\n%s" % (errors[-1] if errors else "nbconvert exited with %s" % rc, out)
    return nbformat.read(str(nb_path), as_version=4)


@pytest.mark.slow
def test_nbconvert_execute_ecosystem(tmp_path):
    """examples/ecosystem.ipynb: IPython.display, magics, %autoreload, plotly, sympy, rich, altair,
    scikit-learn and asyncio, through nbconvert, without an error (a copy runs: it writes a module beside
    itself).  In check-slow: its imports alone take some 15 s of CPU, and README's first Quick start command
    runs the same notebook through nbconvert."""
    nb = execute_example(ECOSYSTEM, tmp_path, 120)
    outputs = {c.source.splitlines()[0]: c.outputs for c in nb.cells if c.cell_type == "code"}
    errors = [o for outs in outputs.values() for o in outs if o.output_type == "error"]
    assert not errors, errors
    data = {first: [m for o in outs if "data" in o for m in o.data] for first, outs in outputs.items()}
    assert "text/markdown" in data["from IPython.display import display, Markdown, HTML"]
    assert "application/vnd.plotly.v1+json" in data["import plotly.graph_objects as go"]
    assert "text/latex" in data["import sympy"]
    assert "text/html" in data["from rich.table import Table"]
    texts = {first: "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outs)
             for first, outs in outputs.items()}
    assert "Hi, pyc!" in texts["helper_module.greet('pyc')   # %autoreload picked up the new file"]
    assert texts["await later"] == "64"
    assert not (tmp_path / "helper_module.py").exists()


def test_nbconvert_execute_timetravel(tmp_path):
    """examples/timetravel.ipynb through nbconvert: %snapshot, %restore and a rolled-back %%transaction in the
    middle of a notebook run by nbclient, whose channels reconnect by themselves to the restored kernel."""
    if not IS_PYC:
        pytest.skip(NOT_PYC_REASON)
    pytest.importorskip("pandas")
    nb = execute_example(TIMETRAVEL, tmp_path, 90)
    code = [c for c in nb.cells if c.cell_type == "code"]
    text = ["".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in c.outputs) for c in code]
    assert "1000.0" in text[2] and "qty" not in text[2]           # the cell that should not have run
    assert "restoring clean" in text[3]
    assert "10.0" in text[4] and "qty" in text[4] and "1000.0" not in text[4]
    assert [o.ename for o in code[5].outputs if o.output_type == "error"] == ["AssertionError"]
    assert text[6] == "['price', 'qty']"
    assert "total" in text[7]
    assert text[8].startswith("clean")
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))


def test_nbconvert_execute_ipython_input(tmp_path):
    """examples/ipython_input.ipynb through nbconvert: a mid-cell __future__ import, pasted prompts and
    indentation, automagic, help and the pager, the ';', script magics and %connect_info, without an error;
    what goes to the pager leaves no output."""
    nb = execute_example(IPYTHON_INPUT, tmp_path, 90)
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    text = {c.source.splitlines()[0]: "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                                              for o in c.outputs) for c in code}
    assert text["radius = 2"] == "{'r': 'Radius', 'return': 'Area'}"
    assert text["def perimeter(r: Radius) -> Length:   # annotations stay strings in later cells too"] == \
        "{'r': 'Radius', 'return': 'Length'}"
    assert text[">>> squares = [n * n for n in range(5)]"] == "[0, 1, 4, 9, 16]"
    assert text["In [1]: total = sum(range(10))"] == "46"
    assert text["    indented = 'pasted from an indented block'"] == "'PASTED FROM AN INDENTED BLOCK'"
    assert text["pwd"].startswith("'/")
    assert "automagic_demo" in text["ls -d automagic_demo"]
    for first in ("len?", "*int*?", "%timeit?", "%quickref", "sum(squares);  # hidden"):
        assert text[first] == "", (first, text[first])
    assert text["%%python3"] == "run by python3\n"
    assert text["%%bash"] == "bash says 42\n"
    assert '"shell_port"' in text["%connect_info"] and "--existing" in text["%connect_info"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))


def test_nbclient_error_raises():
    from nbclient.exceptions import CellExecutionError

    nb = error_notebook()
    client, pids = _client(nb)
    try:
        with pytest.raises(CellExecutionError) as info:
            client.execute()
    finally:
        _finish(pids)
    assert "ZeroDivisionError" in str(info.value)
    assert simplify(nb.cells[0].outputs) == [("stream", "stdout", "before 1\n")]
    assert nb.cells[2].outputs == []  # not run


def test_nbclient_allow_errors():
    nb = error_notebook()
    client, pids = _client(nb, allow_errors=True)
    try:
        client.execute()
    finally:
        _finish(pids)
    assert simplify(nb.cells[0].outputs) == [("stream", "stdout", "before 1\n")]
    errs = [o for o in nb.cells[1].outputs if o["output_type"] == "error"]
    assert len(errs) == 1 and errs[0]["ename"] == "ZeroDivisionError"
    # the kernel and its namespace survived the error
    assert simplify(nb.cells[2].outputs) == [("stream", "stdout", "after 1\n")]
    assert [c.execution_count for c in nb.cells] == [1, 2, 3]


@pytest.mark.timeout(120)
def test_nbclient_cell_timeout_interrupts():
    """A cell over nbclient's timeout is interrupted (interrupt_on_timeout) and the error recorded."""
    nb = new_notebook(cells=[new_code_cell("import time\ntime.sleep(60)"), new_code_cell("print('next')")])
    client, pids = _client(nb, allow_errors=True)
    client.timeout = 3
    client.interrupt_on_timeout = True
    t0 = time.monotonic()
    try:
        client.execute()
    finally:
        _finish(pids)
    assert time.monotonic() - t0 < 45
    errs = [o for o in nb.cells[0].outputs if o["output_type"] == "error"]
    assert errs and errs[0]["ename"] == "KeyboardInterrupt", nb.cells[0].outputs
    assert simplify(nb.cells[1].outputs) == [("stream", "stdout", "next\n")]
