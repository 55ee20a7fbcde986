"""Which cells display a result, and which cells' lines stay readable (src/py/cell.c, src/common/lastline.c).

A cell whose last statement cannot be an expression is compiled from its source in one step (the fast path);
the rest through the AST, where a last expression statement displays.  The tests here are the decisions the
scan makes on the way -- strings, comments and brackets that hide '=' and keywords, ';', continuations,
decorators, walrus, lambdas with defaults -- each checked by what the kernel displays, and the compile errors
and top-level await that both paths must treat alike.  Then the cell's lines: a cell's source is dropped from
linecache after it when nothing can ask for it, so a function defined in an earlier cell must still show its
lines in a traceback and to inspect.getsource, a failing cell its own, a cell printing its own traceback or a
warning its own while it runs, and cells of `x = i` must not add entries."""

import re

import pytest

from pyctest import (IS_PYC, eval_value, execute, ipykernel_falls_short_if, reference_version, result_text,
                     stream_text, summarize)

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize(
    "code, expected",
    [
        ("x_fp = 1", None),
        ("x_fp = 1\nx_fp", "1"),
        ("x_fp = 1; x_fp", "1"),
        ("x_fp = 2; x_fp;", None),
        ("x_fp = 1;", None),
        ("s_fp = 'a = b'", None),
        ("'a = b'", "'a = b'"),
        ("'import os'", "'import os'"),
        ("s_fp = '''\nx_fp\n'''", None),
        ("'''\nx = 1\n'''", "'\\nx = 1\\n'"),
        ("(1,\n 2)", "(1, 2)"),
        ("t_fp = (1,\n       2)", None),
        ("x_fp = 1  # y = 2\nx_fp  # = 3", "1"),
        ("x_fp = 5 \\\n  + 1\nx_fp", "6"),
        ("x_fp = 5\nx_fp \\\n  + 1", "6"),
        ("if True: 5", None),
        ("if True:\n    5\nelse:\n    6", None),
        ("for i_fp in range(2):\n    i_fp", None),
        ("(w_fp := 2)", "2"),
        ("x_fp = 1\nx_fp == 1", "True"),
        ("x_fp = 1\nx_fp != 2, x_fp <= 1, x_fp >= 1", "(True, True, True)"),
        ("a_fp = [0]\na_fp[0] = 3", None),
        ("a_fp = [0]\na_fp[0] = 3\na_fp", "[3]"),
        ("n_fp: int = 3", None),
        ("n_fp = 1\nn_fp <<= 2\nn_fp", "4"),
        ("import functools\n@functools.lru_cache\ndef d_fp():\n    return 4", None),
        ("f_fp = lambda x=1: x\nf_fp()", "1"),
        ("(lambda x=7: x)()", "7"),
        ("dict(a=1)", "{'a': 1}"),
        ("f'{1 + 1=}'", "'1 + 1=2'"),
        ("import os", None),
        ("del_fp = 1\ndel del_fp", None),
        ("pass", None),
        ("format(3)", "'3'"),
        ("classes = 5\nclasses", "5"),
        ("None", None),
    ],
)
def test_display_decision(kc, code, expected):
    reply, msgs = execute(kc, code)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert result_text(msgs) == expected, summarize(msgs)


def test_print_is_an_expression(kc):
    reply, msgs = execute(kc, "p_fp = 0\nprint('printed_fp')")
    assert reply["content"]["status"] == "ok"
    assert stream_text(msgs) == "printed_fp\n"
    assert result_text(msgs) is None


def test_silent_runs_without_result(kc):
    reply, msgs = execute(kc, "silent_fp = 6\nsilent_fp", silent=True)
    assert reply["content"]["status"] == "ok"
    assert eval_value(kc, "silent_fp") == "6"


@pytest.mark.parametrize(
    "code, ename",
    [
        ("return 5", "SyntaxError"),
        ("x_fp = (yield)", "SyntaxError"),
        ("nonlocal n_fp", "SyntaxError"),
        # IPython compiles a cell as codeop does, allowing incomplete input: from Python 3.13 on an unclosed
        # bracket is then CPython's private _IncompleteInputError, "incomplete input", under ipykernel (before
        # 3.13 a SyntaxError "incomplete input"), where Python says SyntaxError "'(' was never closed".
        pytest.param("x_fp = (1", "SyntaxError", marks=ipykernel_falls_short_if(
            (reference_version("python") or (0,)) >= (3, 13), "ipykernel: _IncompleteInputError from Python 3.13")),
        ("x_fp = 1\n  y_fp = 2", "IndentationError"),
    ],
)
def test_compile_errors(kc, code, ename):
    reply, msgs = execute(kc, code)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == ename, reply["content"]


def test_top_level_await_on_both_paths(kc):
    reply, msgs = execute(kc, "import asyncio\nr_fp = await asyncio.sleep(0, 'slept')")
    assert reply["content"]["status"] == "ok", reply["content"]
    reply, msgs = execute(kc, "await asyncio.sleep(0, r_fp)")
    assert result_text(msgs) == "'slept'"


def traceback_text(reply):
    return ANSI.sub("", "\n".join(reply["content"]["traceback"]))


def test_function_from_an_earlier_cell_shows_its_lines(kc):
    reply, _ = execute(kc, "def boom_fp(a):\n    b = a * 2\n    raise ValueError('boom %d' % b)\n")
    defined = reply["content"]["execution_count"]
    for i in range(3):          # cells in between, whose own lines are dropped
        execute(kc, "between_fp = %d" % i)
    reply, _ = execute(kc, "boom_fp(21)")
    assert reply["content"]["status"] == "error"
    tb = traceback_text(reply)
    assert "raise ValueError('boom %d' % b)" in tb, tb
    if IS_PYC:
        assert "In [%d]" % defined in tb, tb
    reply, msgs = execute(kc, "import inspect\nprint(inspect.getsource(boom_fp), end='')")
    assert stream_text(msgs) == "def boom_fp(a):\n    b = a * 2\n    raise ValueError('boom %d' % b)\n"


def test_class_from_an_earlier_cell_has_source(kc):
    execute(kc, "class Src_fp:\n    def m(self):\n        return 1\n")
    execute(kc, "after_class_fp = 1")
    reply, msgs = execute(kc, "import inspect\nprint(inspect.getsource(Src_fp.m), end='')")
    assert stream_text(msgs) == "    def m(self):\n        return 1\n", summarize(msgs)


def test_failing_cell_shows_its_lines(kc):
    reply, _ = execute(kc, "fail_fp = 1\nraise KeyError('failing_fp')")
    assert reply["content"]["status"] == "error"
    tb = traceback_text(reply)
    assert "fail_fp = 1" in tb and "raise KeyError('failing_fp')" in tb, tb


def test_cell_reads_its_own_lines_while_it_runs(kc):
    code = "import traceback\ntry:\n    1 / 0  # own_line_fp\nexcept ZeroDivisionError:\n    traceback.print_exc()"
    reply, msgs = execute(kc, code)
    assert reply["content"]["status"] == "ok"
    assert "1 / 0  # own_line_fp" in stream_text(msgs, "stderr"), summarize(msgs)
    code = "import warnings\nwarnings.warn('warned_fp')  # warn_line_fp"
    reply, msgs = execute(kc, code)
    assert "warn_line_fp" in stream_text(msgs, "stderr"), summarize(msgs)


@pytest.mark.skipif(not IS_PYC, reason="pyc's linecache policy (ipykernel keeps every cell)")
def test_plain_cells_leave_no_linecache_entries(kc):
    count = "import linecache, os\nsum(1 for k in linecache.cache if os.path.basename(k)[:1].isdigit())"
    reply, msgs = execute(kc, count)
    before = int(result_text(msgs))
    for i in range(30):
        reply, _ = execute(kc, "plain_fp = %d" % i)
        assert reply["content"]["status"] == "ok"
    reply, msgs = execute(kc, count)
    assert int(result_text(msgs)) == before
    # A cell that defines a function keeps its entry.
    execute(kc, "def kept_fp():\n    return 1\n")
    reply, msgs = execute(kc, count)
    assert int(result_text(msgs)) == before + 1
