"""pyc._magics: the runtime of !cmd, obj?, %time, %timeit, %cd, %pwd, %env, %matplotlib -- run through
transform_cell as the kernel does (conftest.run_cell)."""

import importlib.util
import os
import re
import sys
import traceback

import pytest

from pyc import _magics

TIME_OUTPUT = re.compile(
    r"CPU times: user \d[\d.]* (?:s|ms|\xb5s|ns), sys: \d[\d.]* (?:s|ms|\xb5s|ns), "
    r"total: \d[\d.]* (?:s|ms|\xb5s|ns)\nWall time: \d[\d.]* (?:s|ms|\xb5s|ns)\n"
)
TIMEIT_OUTPUT = re.compile(
    r"\d[\d.]* (?:s|ms|\xb5s|ns) \xb1 \d[\d.]* (?:s|ms|\xb5s|ns) per loop "
    r"\(mean \xb1 std\. dev\. of (\d+) runs?, ([\d,]+) loops? each\)\n"
)


# ---- shell ------------------------------------------------------------------------------------------------


def test_shell_output_and_exit_code(cell, capfd):
    cell("!echo hello; echo oops >&2")
    out, err = capfd.readouterr()
    assert out == "hello\n"
    assert err == "oops\n"
    assert cell.ns["_exit_code"] == 0
    cell("!exit 3")
    assert cell.ns["_exit_code"] == 3


def test_shell_output_order_with_print(cell, capfd):
    cell("print('before')\n!echo during\nprint('after')")
    assert capfd.readouterr().out == "before\nduring\nafter\n"


def test_shell_expansion(cell, capfd):
    cell("name = 'world'\nn = 2\n!echo hello {name} $name {n + 1} '$name' 5$$")
    assert capfd.readouterr().out == "hello world world 3 $name 5$\n"


def test_shell_expansion_failure_leaves_the_command(cell, capfd):
    cell("!echo $HOME_NOT_A_PY_NAME_0 '{print $1}' | tr -d x")
    assert capfd.readouterr().out == "{print $1}\n"


def test_shell_inside_function(cell, capfd):
    cell("def f(word):\n    !echo {word}\nf('local')")
    assert capfd.readouterr().out == "local\n"


def test_shell_capture(cell):
    lines = cell("files = !printf 'a\\nb\\n'\nfiles")
    assert lines == ["a", "b"]
    assert lines.s == "a b" and lines.n == "a\nb" and lines.l == ["a", "b"]
    assert cell("!!echo x; echo y >&2") == ["x", "y"]


def test_shell_uses_the_kernels_system_when_there_is_one(cell, fake_pyc, capfd):
    seen = []

    def system(cmd):
        seen.append((cmd, os.environ.get("MPLBACKEND")))
        return 7

    fake_pyc.system = system
    cell("v = 1\n!echo {v}")
    assert seen == [("echo 1", None)]  # pyc's MPLBACKEND is not passed on to children
    assert os.environ["MPLBACKEND"] == _magics.BACKEND
    assert cell.ns["_exit_code"] == 7


def test_children_do_not_inherit_pycs_mplbackend(cell, capfd):
    cell("!echo ${MPLBACKEND:-unset}")
    assert capfd.readouterr().out == "unset\n"


def test_expand():
    ns = {"a": 1, "s": "x y"}
    assert _magics.expand("echo {a} $a $$ {{a}}", ns) == "echo 1 1 $ {a}"
    assert _magics.expand("echo '$a' $a", ns) == "echo '$a' 1"
    assert _magics.expand("echo $nope $a", ns) == "echo $nope $a"
    assert _magics.expand("awk '{print $1}'", ns) == "awk '{print $1}'"
    assert _magics.expand("echo ${a}", ns) == "echo $1"  # as IPython: {a} is expanded


# ---- help -------------------------------------------------------------------------------------------------


def test_help_page_payload(cell, fake_pyc):
    cell("def f(a):\n    '''Doc of f.'''\n    return a\n")
    cell("f?")
    (call,) = fake_pyc.named("add_payload")
    payload = call[1][0]
    assert payload["source"] == "page" and payload["start"] == 0
    text = payload["data"]["text/plain"]
    assert "Signature: f(a)" in text and "Doc of f." in text
    fake_pyc.calls.clear()
    cell("f??")
    text = fake_pyc.named("add_payload")[0][1][0]["data"]["text/plain"]
    assert "return a" in text


def test_help_not_found(cell, fake_pyc, capsys):
    cell("nothing_here?")
    assert capsys.readouterr().out == "Object `nothing_here` not found.\n"
    assert fake_pyc.named("add_payload") == []


def test_help_on_magic_and_alone(cell, fake_pyc):
    cell("%timeit?")
    assert "Time a statement over many loops" in fake_pyc.named("add_payload")[0][1][0]["data"]["text/plain"]
    fake_pyc.calls.clear()
    cell("?")
    assert "%timeit" in fake_pyc.named("add_payload")[0][1][0]["data"]["text/plain"]


# ---- %time ------------------------------------------------------------------------------------------------


def test_time_statement(cell, capsys):
    assert cell("%time y = sum(range(1000))") is None
    assert cell.ns["y"] == 499500
    assert TIME_OUTPUT.fullmatch(capsys.readouterr().out)


def test_time_expression_returns_value(cell, capsys):
    assert cell("%time 6 * 7") == 42
    assert TIME_OUTPUT.fullmatch(capsys.readouterr().out)


def test_time_cell(cell, capsys):
    assert cell("%%time\na = 2\nb = a * 3\nb + 1") == 7
    assert cell.ns["b"] == 6
    assert TIME_OUTPUT.fullmatch(capsys.readouterr().out)


def test_time_cell_with_statement_on_line_is_an_error(cell):
    with pytest.raises(_magics.UsageError):
        cell("%%time x = 1\ny = 2")


def test_time_error_points_at_the_users_line(cell):
    with pytest.raises(ZeroDivisionError) as e:
        cell("x = 1\n%time 1 / 0")
    frames = traceback.extract_tb(e.value.__traceback__)
    last = frames[-1]
    assert last.filename.startswith("<cell-") and last.lineno == 2
    assert last.line == "%time 1 / 0"
    assert (last.colno, last.end_colno) == (6, 11)


def test_time_cell_error_line(cell):
    with pytest.raises(NameError) as e:
        cell("%%time\nx = 1\nundefined_name")
    last = traceback.extract_tb(e.value.__traceback__)[-1]
    assert last.lineno == 3 and last.line == "undefined_name"


def test_format_time():
    f = _magics.format_time
    assert f(1.5) == "1.5 s"
    assert f(0.00123) == "1.23 ms"
    assert f(0.00000456) == "4.56 \xb5s"
    assert f(0.000000789) == "789 ns"
    assert f(0) == "0 ns"
    assert f(9.999999e-07) == "1 \xb5s"
    assert f(125) == "2min 5s"


# ---- %timeit ----------------------------------------------------------------------------------------------


def test_timeit_runs_loops_and_prints(cell, capsys):
    cell("calls = []\n%timeit -n3 -r2 calls.append(1)")
    assert len(cell.ns["calls"]) == 6
    m = TIMEIT_OUTPUT.fullmatch(capsys.readouterr().out)
    assert m and m.groups() == ("2", "3")


def test_timeit_singular_and_thousands(capsys):
    r = _magics.TimeitResult(1000, 1, 1e-6, 1e-6, [1e-3], 0.0, 3)
    assert str(r) == "1 \xb5s \xb1 0 ns per loop (mean \xb1 std. dev. of 1 run, 1,000 loops each)"


def test_timeit_chooses_the_number_of_loops(cell, capsys):
    r = cell("import time\nr = %timeit -o -r1 time.sleep(0.03)\nr")
    # 1 loop takes 0.03 s < 0.2 s; 10 loops take 0.3 s >= 0.2 s
    assert r.loops == 10 and r.repeat == 1
    assert 0.025 < r.best < 0.2
    m = TIMEIT_OUTPUT.fullmatch(capsys.readouterr().out)
    assert m and m.groups() == ("1", "10")


def test_timeit_quiet_and_result(cell, capsys):
    r = cell("r = %timeit -q -o -n5 -r3 x = 1\nr")
    assert isinstance(r, _magics.TimeitResult)
    assert (r.loops, r.repeat, len(r.all_runs)) == (5, 3, 3)
    assert r.average > 0 and r.stdev >= 0
    assert capsys.readouterr().out == ""


def test_timeit_uses_the_namespace_and_does_not_leak(cell, capsys):
    cell("base = 10\n%timeit -n1 -r1 tmp = base + 1")
    assert "tmp" not in cell.ns


def test_timeit_cell(cell, capsys):
    cell("%%timeit -n4 -r2 acc = []\nacc.append(1)\nacc2 = acc")
    m = TIMEIT_OUTPUT.fullmatch(capsys.readouterr().out)
    assert m and m.groups() == ("2", "4")


def test_timeit_bad_options(cell):
    with pytest.raises(_magics.UsageError):
        cell("%timeit -n x = 1")


def test_timeit_syntax_error_in_statement(cell):
    with pytest.raises(SyntaxError):
        cell("%timeit -n1 x = = 1")


# ---- %cd, %pwd, %env --------------------------------------------------------------------------------------


def test_cd_and_pwd(cell, capsys, tmp_path, restore_cwd):
    (tmp_path / "sub dir").mkdir()
    cell("%cd " + str(tmp_path))
    assert os.getcwd() == str(tmp_path)
    assert capsys.readouterr().out == str(tmp_path) + "\n"
    assert cell("%pwd") == str(tmp_path)
    assert cell("here = %pwd\nhere") == str(tmp_path)
    cell("%cd 'sub dir'")
    assert os.getcwd() == str(tmp_path / "sub dir")
    cell("%cd -")
    assert os.getcwd() == str(tmp_path)
    cell("d = 'sub dir'\n%cd -q {d}")
    assert os.getcwd() == str(tmp_path / "sub dir")
    capsys.readouterr()
    cell("%cd -q")
    assert os.getcwd() == os.path.expanduser("~")
    assert capsys.readouterr().out == ""


def test_cd_missing_directory_raises(cell, restore_cwd, tmp_path):
    with pytest.raises(FileNotFoundError):
        cell("%cd " + str(tmp_path / "nope"))
    assert os.getcwd() == restore_cwd


def test_env(cell, capsys, monkeypatch):
    monkeypatch.setenv("PYC_TEST_A", "alpha")
    monkeypatch.setenv("MY_API_KEY", "hunter2")
    monkeypatch.delenv("PYC_TEST_B", raising=False)
    monkeypatch.delenv("PYC_TEST_C", raising=False)
    env = cell("%env")
    assert env["PYC_TEST_A"] == "alpha" and env["MY_API_KEY"] == "<hidden>"
    assert cell("%env PYC_TEST_A") == "alpha"
    cell("%env PYC_TEST_B=beta")
    assert os.environ["PYC_TEST_B"] == "beta"
    assert capsys.readouterr().out == "env: PYC_TEST_B=beta\n"
    cell("v = 'gam'\n%env PYC_TEST_C {v}ma")
    assert os.environ["PYC_TEST_C"] == "gamma"
    with pytest.raises(_magics.UsageError, match="Environment does not have key: PYC_NOPE_NOPE"):
        cell("%env PYC_NOPE_NOPE")


# ---- %matplotlib and unknown magics -----------------------------------------------------------------------


def test_matplotlib_inline(cell):
    pytest.importorskip("matplotlib")
    import matplotlib

    cell("%matplotlib inline")
    assert matplotlib.get_backend() == _magics.BACKEND
    with pytest.raises(_magics.UsageError, match="a GUI backend needs an event loop"):
        cell("%matplotlib qt")
    with pytest.raises(_magics.UsageError, match="no such backend"):
        cell("%matplotlib nonesuch")
    if importlib.util.find_spec("ipympl") is None:
        with pytest.raises(_magics.UsageError, match="need the ipympl package"):
            cell("%matplotlib widget")
    cell("%matplotlib agg")
    assert matplotlib.get_backend().lower() == "agg"
    cell("%matplotlib inline")
    assert matplotlib.get_backend() == _magics.BACKEND


@pytest.fixture
def no_ipython(monkeypatch):
    """As on a machine without IPython: pyc._shell.get_ipython finds none."""
    from pyc import _shell

    monkeypatch.setattr(_shell, "get_ipython", lambda: None)
    monkeypatch.setattr(_magics, "_ipython_installed", lambda: False)


class FakeShell:
    """Records the magics handed to IPython's shell."""

    def __init__(self):
        self.calls = []

    def run_line_magic(self, name, line, _stack_depth=1):
        self.calls.append(("line", name, line, _stack_depth))
        return "line result"

    def run_cell_magic(self, name, line, body):
        self.calls.append(("cell", name, line, body))


def test_unknown_magic_without_ipython(cell, no_ipython):
    with pytest.raises(_magics.UnknownMagic) as e:
        cell("x = 1\n%load_ext autoreload")
    msg = str(e.value)
    assert msg.startswith("%load_ext is an IPython magic, and IPython is not installed")
    for name in ("%cd", "%env", "%matplotlib", "%pwd", "%time", "%timeit", "%%time", "%%timeit", "%%script", "!cmd",
                 "%quickref", "%connect_info", "%ls"):
        assert name in msg
    assert cell.ns["x"] == 1


def test_unknown_and_misplaced_cell_magics(cell, no_ipython):
    with pytest.raises(_magics.UnknownMagic, match="%%html is an IPython magic"):
        cell("%%html\n<b>hi</b>")
    with pytest.raises(_magics.UsageError, match="--out needs a variable name"):
        cell("%%bash --out\necho hi")
    with pytest.raises(_magics.UsageError, match="first line"):
        cell("x = 1\n%%time\ny = 2")


def test_other_magics_go_to_the_ipython_shell(cell, monkeypatch):
    from pyc import _shell

    shell = FakeShell()
    monkeypatch.setattr(_shell, "get_ipython", lambda: shell)
    cell("r = %load_ext autoreload")
    cell("%%html -i\n<b>hi</b>")
    cell("%time y = 3")          # pyc's own: not handed over
    cell("%%bash --no-raise-error\ntrue")
    assert shell.calls == [("line", "load_ext", "autoreload", 2), ("cell", "html", "-i", "<b>hi</b>\n")]
    assert cell.ns["r"] == "line result" and cell.ns["y"] == 3


def test_magic_and_shell_in_indented_blocks(cell, capfd):
    cell("for i in range(2):\n    !echo {i}\n    t = %pwd")
    assert capfd.readouterr().out == "0\n1\n"
    assert cell.ns["t"] == os.getcwd()


def test_matplotlib_inline_before_matplotlib_is_imported():
    # in a fresh interpreter whose environment names another backend
    import subprocess

    code = (
        "import sys, types\n"
        "sys.modules['_pyc'] = types.ModuleType('_pyc')\n"
        "from pyc._magics import line_magic\n"
        "line_magic('matplotlib', 'inline')\n"
        "import os, matplotlib.pyplot as plt\n"
        "print(plt.get_backend(), os.environ.get('MPLBACKEND'))\n"
    )
    kernel_python = os.path.join(os.path.dirname(__file__), "..", "..", "kernel", "python")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(kernel_python), MPLBACKEND="agg")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [_magics.BACKEND, "agg"]
