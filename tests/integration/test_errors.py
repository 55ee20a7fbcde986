"""Errors in cells (DESIGN.md sections 3 and 4): error replies and messages, tracebacks, SystemExit,
KeyboardInterrupt, stop_on_error."""

import os
import re

import pytest

from pyctest import (
    eval_value,
    execute,
    get_reply,
    iopub_for,
    outputs,
    pyc_only,
    result_text,
    stream_text,
    summarize,
)

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
PY_PATH = re.compile(r"(/[^\s\"'<>:,()]+\.py)\b")


def tb_text(content):
    return ANSI.sub("", "\n".join(content["traceback"]))


def assert_no_kernel_frames(text):
    """No frame of the kernel's own implementation: no absolute .py path at all (the cells are not files),
    and no trace of a kernel package."""
    paths = [p for p in PY_PATH.findall(text) if os.path.exists(p)]
    assert paths == [], "traceback shows kernel-internal files:\n" + text
    for word in ("ipykernel", "site-packages/IPython", "dist-packages/IPython"):
        assert word not in text, "traceback shows kernel internals (%s):\n%s" % (word, text)


def check_error(reply, msgs, ename):
    c = reply["content"]
    assert c["status"] == "error", c
    assert c["ename"] == ename
    assert isinstance(c["evalue"], str)
    assert isinstance(c["traceback"], list) and all(isinstance(x, str) for x in c["traceback"])
    errs = outputs(msgs, "error")
    assert len(errs) == 1, summarize(msgs)
    e = errs[0]["content"]
    assert e["ename"] == c["ename"] and e["evalue"] == c["evalue"]
    assert e["traceback"] == c["traceback"]
    return c


def test_name_error(kc):
    reply, msgs = execute(kc, "ne_a = 1\nundefined_zz + ne_a")
    c = check_error(reply, msgs, "NameError")
    assert "undefined_zz" in c["evalue"]
    # the error message is the only output: no copy of the traceback on stderr
    assert [m["msg_type"] for m in outputs(msgs)] == ["error"], summarize(msgs)
    assert stream_text(msgs, "stderr") == ""
    text = tb_text(c)
    assert "undefined_zz + ne_a" in text, text  # the user's line
    assert "NameError" in text
    assert_no_kernel_frames(text)


def test_error_keeps_namespace(kc):
    execute(kc, "kept_value = 'still here'")
    reply, msgs = execute(kc, "kept_value = 'changed'\nraise RuntimeError('boom')")
    assert reply["content"]["status"] == "error"
    reply, msgs = execute(kc, "kept_value")
    assert result_text(msgs) == "'changed'"


def test_output_before_error_is_kept(kc):
    reply, msgs = execute(kc, "print('before')\nraise ValueError('after print')")
    check_error(reply, msgs, "ValueError")
    assert reply["content"]["evalue"] == "after print"
    assert [m["msg_type"] for m in outputs(msgs)] == ["stream", "error"], summarize(msgs)
    assert stream_text(msgs) == "before\n"


def test_syntax_error(kc):
    reply, msgs = execute(kc, "1 +* 2")
    c = check_error(reply, msgs, "SyntaxError")
    assert "1 +* 2" in tb_text(c)
    assert_no_kernel_frames(tb_text(c))
    reply, msgs = execute(kc, "def broken(:\n    pass")
    check_error(reply, msgs, "SyntaxError")
    reply, msgs = execute(kc, "if True:\n  x = 1\n    y = 2")
    assert reply["content"]["ename"] in ("IndentationError", "SyntaxError")


def test_error_in_function_from_earlier_cell(kc):
    reply, msgs = execute(kc, "def boom_fn():\n    bx = 1\n    return bx / 0\n")
    assert reply["content"]["status"] == "ok"
    execute(kc, "pass")  # another cell in between
    reply, msgs = execute(kc, "boom_fn()")
    c = check_error(reply, msgs, "ZeroDivisionError")
    text = tb_text(c)
    assert "boom_fn()" in text
    assert "bx / 0" in text, text  # the line of the earlier cell
    assert_no_kernel_frames(text)


def test_exception_with_cause_and_unicode(kc):
    reply, msgs = execute(kc, "try:\n    {}['k\u00e9y']\nexcept KeyError as e:\n    raise ValueError('\u4e2d\u6587 \U0001F600') from e")
    c = check_error(reply, msgs, "ValueError")
    assert c["evalue"] == "\u4e2d\u6587 \U0001F600"
    assert "KeyError" in tb_text(c)


@pytest.mark.parametrize("code, code_value", [("raise SystemExit(3)", "3"), ("import sys\nsys.exit(2)", "2"), ("import sys\nsys.exit()", "")])
def test_system_exit_ends_cell_not_kernel(kc, code, code_value):
    execute(kc, "se_before = 'alive'")
    reply, msgs = execute(kc, code)
    c = reply["content"]
    assert c["status"] == "error", c
    assert c["ename"] == "SystemExit"
    assert c["evalue"] == code_value  # the exit code is reported
    assert len(outputs(msgs, "error")) == 1
    assert eval_value(kc, "se_before") == "'alive'"
    reply, msgs = execute(kc, "print('next cell')")
    assert stream_text(msgs) == "next cell\n"


@pyc_only
@pytest.mark.parametrize("code", ["exit()", "quit()", "exit(4)"])
def test_exit_and_quit_end_cell_not_kernel(kernel, code):
    """ipykernel treats exit()/quit() as a request to close the frontend (ok reply with an ask_exit payload,
    then it stops); pyc follows DESIGN.md section 4: SystemExit ends the cell, never the kernel."""
    kc = kernel.kc
    execute(kc, "eq_before = 'alive'")
    reply, msgs = execute(kc, code)
    c = reply["content"]
    assert c["status"] == "error", c
    assert c["ename"] == "SystemExit"
    if code == "exit(4)":
        assert c["evalue"] == "4"
    assert eval_value(kc, "eq_before") == "'alive'"
    assert kernel.is_alive()


def test_keyboard_interrupt_raised_in_code(kc):
    execute(kc, "ki_before = 1")
    reply, msgs = execute(kc, "raise KeyboardInterrupt")
    check_error(reply, msgs, "KeyboardInterrupt")
    assert eval_value(kc, "ki_before") == "1"


def test_base_exception_subclass(kc):
    reply, msgs = execute(kc, "class MyBase(BaseException):\n    pass\nraise MyBase('custom')")
    check_error(reply, msgs, "MyBase")
    reply, msgs = execute(kc, "print('ok after BaseException')")
    assert reply["content"]["status"] == "ok"


def _queue_three(kc, first, stop_on_error=True):
    ids = [
        kc.execute(first, stop_on_error=stop_on_error),
        kc.execute("soe_ran_2 = True\nprint('second')"),
        kc.execute("soe_ran_3 = True\nprint('third')"),
    ]
    replies = [get_reply(kc, i) for i in ids]
    msgs = [iopub_for(kc, i) for i in ids]
    return replies, msgs


def test_stop_on_error_aborts_queued_requests(kc):
    execute(kc, "soe_ran_2 = soe_ran_3 = False")
    replies, msgs = _queue_three(kc, "import time\ntime.sleep(0.3)\nraise ValueError('first fails')")
    assert replies[0]["content"]["status"] == "error"
    assert replies[0]["content"]["ename"] == "ValueError"
    for r, m in zip(replies[1:], msgs[1:]):
        assert r["msg_type"] == "execute_reply"
        assert r["content"]["status"] == "aborted", r["content"]
        # each aborted request has its own busy and idle (checked by iopub_for) and no output
        assert outputs(m, ("stream", "execute_result", "error", "display_data")) == [], summarize(m)
    assert eval_value(kc, "(soe_ran_2, soe_ran_3)") == "(False, False)"
    # later requests run again
    reply, m = execute(kc, "print('after abort')")
    assert reply["content"]["status"] == "ok"
    assert stream_text(m) == "after abort\n"


def test_no_stop_on_error_runs_queued_requests(kc):
    execute(kc, "soe_ran_2 = soe_ran_3 = False")
    replies, msgs = _queue_three(kc, "import time\ntime.sleep(0.3)\nraise ValueError('first fails')", stop_on_error=False)
    assert replies[0]["content"]["status"] == "error"
    assert [r["content"]["status"] for r in replies[1:]] == ["ok", "ok"]
    assert stream_text(msgs[1]) == "second\n"
    assert stream_text(msgs[2]) == "third\n"
    assert eval_value(kc, "(soe_ran_2, soe_ran_3)") == "(True, True)"


def test_no_abort_after_success(kc):
    replies, msgs = _queue_three(kc, "import time\ntime.sleep(0.2)")
    assert [r["content"]["status"] for r in replies] == ["ok", "ok", "ok"]
