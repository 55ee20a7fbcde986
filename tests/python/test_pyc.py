"""pyc (the package's public API) and its import cost."""

import os
import re
import subprocess
import sys

import pyc

KERNEL_PYTHON = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "kernel", "python"))


def test_display(fake_pyc):
    assert pyc.display(1, "a", metadata={"m": 1}) is None
    assert fake_pyc.calls == [
        ("display", (1, "a"), {"metadata": {"m": 1}, "transient": None, "display_id": None, "raw": False})
    ]


def test_display_raw(fake_pyc):
    pyc.display({"text/html": "<b>x</b>", "text/plain": "x"}, raw=True)
    assert fake_pyc.calls[0][2]["raw"] is True


def test_display_id_true_makes_a_handle(fake_pyc):
    h = pyc.display("x", display_id=True)
    assert isinstance(h, pyc.DisplayHandle)
    assert re.fullmatch(r"[0-9a-f]{32}", h.display_id)
    assert fake_pyc.calls[0][2]["display_id"] == h.display_id
    h2 = pyc.display("y", display_id=True)
    assert h2.display_id != h.display_id
    assert repr(h) == "<DisplayHandle display_id=%s>" % h.display_id


def test_display_id_str(fake_pyc):
    h = pyc.display("x", display_id="mine")
    assert h.display_id == "mine"


def test_handle_update_and_display(fake_pyc):
    h = pyc.DisplayHandle()
    h.display("one")
    h.update("two", metadata={"k": 1})
    assert fake_pyc.calls == [
        ("display", ("one",), {"metadata": None, "transient": None, "display_id": h.display_id, "raw": False}),
        ("update_display", ("two",), {"display_id": h.display_id, "metadata": {"k": 1}, "raw": False}),
    ]


def test_update_display_and_clear_output(fake_pyc):
    pyc.update_display("v", display_id="abc")
    pyc.clear_output()
    pyc.clear_output(wait=True)
    assert fake_pyc.calls == [
        ("update_display", ("v",), {"display_id": "abc", "metadata": None, "raw": False}),
        ("clear_output", (), {"wait": False}),
        ("clear_output", (), {"wait": True}),
    ]


def test_display_clear_first(fake_pyc):
    pyc.display("x", clear=True)
    assert [c[0] for c in fake_pyc.calls] == ["clear_output", "display"]


def test_display_handle_without_objects(fake_pyc):
    h = pyc.display(display_id=True)
    assert isinstance(h, pyc.DisplayHandle) and fake_pyc.calls == []


def _run(code):
    env = dict(os.environ, PYTHONPATH=KERNEL_PYTHON, PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_import_pyc_imports_nothing_else():
    out = _run("import sys\nbefore = set(sys.modules)\nimport pyc\nprint(sorted(set(sys.modules) - before))")
    assert out.strip() == "['pyc']"


def test_modules_import_lazily():
    # the kernel-side modules only pull in what they need when they are used
    out = _run(
        "import sys\nbefore = set(sys.modules)\n"
        "import pyc._transform, pyc._magics, pyc._complete, pyc._inspect\n"
        "print(sorted(m for m in set(sys.modules) - before if not m.startswith('pyc')))"
    )
    new = eval(out)
    assert not any(m.split(".")[0] in ("jedi", "IPython", "matplotlib", "numpy", "subprocess") for m in new), new


def test_no_ipython_anywhere():
    out = _run(
        "import sys, types, os\n"
        "sys.modules['_pyc'] = types.ModuleType('_pyc')\n"
        "sys.modules['_pyc'].add_payload = lambda p: None\n"
        "import pyc, pyc._complete, pyc._inspect, pyc._transform, pyc._magics, pyc._pretty, pyc._traceback\n"
        "pyc._pretty.pretty({'a': [1, 2]})\n"
        "pyc._complete.complete('import os\\nos.pa', 16, {})\n"
        "pyc._inspect.inspect('len(', 4, 1, {})\n"
        "pyc._transform.transform_cell('!ls\\n%time 1\\nx?')\n"
        "import matplotlib\n"
        "matplotlib.use('module://pyc.mpl_backend')\n"
        "import matplotlib.pyplot\n"
        "print('IPython' in sys.modules)\n"
    )
    assert out.strip() == "False"
