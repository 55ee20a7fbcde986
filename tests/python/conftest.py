"""pytest configuration of the tests of kernel/python/pyc (the kernel's Python package), run without the
kernel: kernel/python goes on sys.path, and a fake `_pyc` module (the kernel's built-in C module) records
the calls that pyc makes to it.  MPLBACKEND selects pyc's matplotlib backend, as the kernel does."""

import os
import sys
import types

import pytest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "kernel", "python")))
os.environ["MPLBACKEND"] = "module://pyc.mpl_backend"
os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
sys.dont_write_bytecode = True


class FakePyc(types.ModuleType):
    """Stands for the kernel's _pyc: each call is appended to .calls as (name, args, kwargs)."""

    def __init__(self):
        super().__init__("_pyc", "fake _pyc for the tests")
        self.calls = []

    def display(self, *objs, metadata=None, transient=None, display_id=None, raw=False):
        self.calls.append(
            ("display", objs, {"metadata": metadata, "transient": transient, "display_id": display_id, "raw": raw})
        )

    def update_display(self, obj, display_id=None, metadata=None, raw=False):
        self.calls.append(("update_display", (obj,), {"display_id": display_id, "metadata": metadata, "raw": raw}))

    def clear_output(self, wait=False):
        self.calls.append(("clear_output", (), {"wait": wait}))

    def add_payload(self, payload):
        self.calls.append(("add_payload", (payload,), {}))

    def named(self, name):
        return [c for c in self.calls if c[0] == name]


FAKE = FakePyc()
sys.modules["_pyc"] = FAKE


@pytest.fixture
def fake_pyc():
    """The fake _pyc, its record cleared before and after the test."""
    FAKE.calls.clear()
    yield FAKE
    FAKE.calls.clear()
    if "system" in vars(FAKE):
        del FAKE.system


@pytest.fixture(params=["jedi", "stdlib"])
def completer(request, monkeypatch):
    """complete(code, pos=len(code), ns=None) calling pyc._complete.complete, with jedi and with jedi disabled
    (PYC_NO_JEDI=1); .engine says which."""
    from pyc import _complete

    if request.param == "jedi":
        pytest.importorskip("jedi")
        monkeypatch.delenv("PYC_NO_JEDI", raising=False)
    else:
        monkeypatch.setenv("PYC_NO_JEDI", "1")

    def complete(code, pos=None, ns=None):
        return _complete.complete(code, len(code) if pos is None else pos, {} if ns is None else ns)

    complete.engine = request.param
    return complete


_cells = iter(range(1, 1 << 30))


def run_cell(code, ns):
    """Runs a cell roughly as the kernel does: the source is registered in linecache as <cell-N>, passed
    through pyc._transform.transform_cell, and run in ns; returns the value of a last expression (what the
    kernel would publish as execute_result), None otherwise."""
    import ast
    import linecache

    from pyc._transform import transform_cell

    name = "<cell-%d>" % next(_cells)
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    tree = ast.parse(transform_cell(code), name)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    ns.setdefault("__builtins__", __builtins__)
    exec(compile(tree, name, "exec"), ns)
    if last is not None:
        return eval(compile(last, name, "eval"), ns)
    return None


@pytest.fixture
def cell(fake_pyc):
    """run(code) -> value of the cell's last expression, all cells sharing one namespace (run.ns)."""
    ns = {"__name__": "__main__"}

    def run(code):
        return run_cell(code, ns)

    run.ns = ns
    return run


@pytest.fixture
def restore_cwd():
    cwd = os.getcwd()
    yield cwd
    os.chdir(cwd)
