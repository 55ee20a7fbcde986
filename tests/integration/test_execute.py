"""execute_request semantics (DESIGN.md sections 3 and 4): namespace, results, execution_count, silent,
store_history, user_expressions, top-level await."""

import pytest

from pyctest import (
    IS_PYC,
    eval_value,
    execute,
    outputs,
    result_text,
    stream_text,
    summarize,
)


def types(msgs):
    return [m["msg_type"] for m in msgs]


def test_namespace_persists(kc):
    reply, _ = execute(kc, "ns_value = 41")
    assert reply["content"]["status"] == "ok"
    reply, msgs = execute(kc, "ns_value + 1")
    assert reply["content"]["status"] == "ok"
    assert result_text(msgs) == "42"
    reply, msgs = execute(kc, "def ns_func(a):\n    return a * ns_value\n")
    reply, msgs = execute(kc, "ns_func(2)")
    assert result_text(msgs) == "82"


def test_main_module_namespace(kc):
    reply, msgs = execute(kc, "__name__")
    assert result_text(msgs) == "'__main__'"
    reply, msgs = execute(kc, "import sys\nmain_check = 17\nsys.modules['__main__'].main_check")
    assert result_text(msgs) == "17"


def test_last_expression_is_result(kc):
    reply, msgs = execute(kc, "1 + 1")
    c = reply["content"]
    assert c["status"] == "ok"
    assert types(msgs) == ["status", "execute_input", "execute_result", "status"]
    res = outputs(msgs, "execute_result")[0]["content"]
    assert res["data"]["text/plain"] == "2"
    assert res["execution_count"] == c["execution_count"]
    assert isinstance(res["metadata"], dict)


def test_result_is_repr(kc):
    reply, msgs = execute(kc, "'a' + 'b'")
    assert result_text(msgs) == "'ab'"
    reply, msgs = execute(kc, "class ReprMe:\n    def __repr__(self):\n        return '<ReprMe!>'\nReprMe()")
    assert result_text(msgs) == "<ReprMe!>"


def test_assignment_has_no_result(kc):
    reply, msgs = execute(kc, "x_assigned = 1")
    assert reply["content"]["status"] == "ok"
    assert outputs(msgs) == []


def test_none_has_no_result(kc):
    reply, msgs = execute(kc, "None")
    assert reply["content"]["status"] == "ok"
    assert outputs(msgs) == []


@pytest.mark.parametrize(
    "code, expected",
    [
        ("1; 2", "2"),
        ("a_ml = 3\na_ml * 2", "6"),
        ("for i in range(3):\n    pass\ni", "2"),
        ("if True:\n    9", None),  # the last statement is not an expression
    ],
)
def test_only_last_expression_displays(kc, code, expected):
    reply, msgs = execute(kc, code)
    assert reply["content"]["status"] == "ok"
    assert result_text(msgs) == expected, summarize(msgs)


def test_trailing_semicolon_suppresses_result(kc):
    # As IPython: a last line ending in ';' shows nothing (pyc decides it the same way).
    reply, msgs = execute(kc, "1 + 2;")
    assert reply["content"]["status"] == "ok"
    assert outputs(msgs) == [], summarize(msgs)


def test_execute_input(kc):
    code = "ei_value = 'execute_input'"
    reply, msgs = execute(kc, code)
    inputs = outputs(msgs, "execute_input")
    assert len(inputs) == 1
    assert msgs[1]["msg_type"] == "execute_input", "execute_input must follow busy"
    assert inputs[0]["content"]["code"] == code
    assert inputs[0]["content"]["execution_count"] == reply["content"]["execution_count"]


def test_execution_count(kc):
    reply, _ = execute(kc, "pass")
    n = reply["content"]["execution_count"]
    assert isinstance(n, int) and n >= 1
    reply, msgs = execute(kc, "ec = 1")
    assert reply["content"]["execution_count"] == n + 1
    # silent: no bump
    reply, msgs = execute(kc, "ec = 2", silent=True)
    assert reply["content"]["status"] == "ok"
    # store_history=False: no bump
    reply, msgs = execute(kc, "ec = 3", store_history=False)
    assert reply["content"]["status"] == "ok"
    reply, msgs = execute(kc, "ec")
    assert reply["content"]["execution_count"] == n + 2
    assert result_text(msgs) == "3"
    # an error still counts
    reply, msgs = execute(kc, "raise ValueError('counted')")
    assert reply["content"]["status"] == "error"
    assert reply["content"]["execution_count"] == n + 3
    reply, msgs = execute(kc, "pass")
    assert reply["content"]["execution_count"] == n + 4


def test_first_count_of_a_fresh_kernel_is_one(fresh_kernel):
    reply, msgs = execute(fresh_kernel.kc, "'first'")
    assert reply["content"]["execution_count"] == 1
    assert outputs(msgs, "execute_result")[0]["content"]["execution_count"] == 1


def test_silent_publishes_nothing(kc):
    reply, msgs = execute(kc, "silent_var = 5\nsilent_var * 2", silent=True)
    assert reply["content"]["status"] == "ok"
    assert types(msgs) == ["status", "status"], summarize(msgs)
    # it did run
    assert eval_value(kc, "silent_var") == "5"


@pytest.mark.skipif(
    not IS_PYC,
    reason="pyc-only: ipykernel publishes the stream output of silent cells; DESIGN.md section 3 says silent "
    "publishes no streams",
)
def test_silent_publishes_no_streams(kc):
    reply, msgs = execute(kc, "import sys\nprint('silent out')\nprint('silent err', file=sys.stderr)", silent=True)
    assert reply["content"]["status"] == "ok"
    assert types(msgs) == ["status", "status"], summarize(msgs)


def test_store_history_false_still_publishes(kc):
    reply, msgs = execute(kc, "print('nohist')\n40 + 2", store_history=False)
    assert reply["content"]["status"] == "ok"
    assert stream_text(msgs) == "nohist\n"
    assert result_text(msgs) == "42"


def test_user_expressions(kc):
    reply, msgs = execute(
        kc,
        "ue_y = 5",
        user_expressions={"double": "ue_y * 2", "bad": "1 / 0", "text": "'ue' * 2"},
    )
    c = reply["content"]
    assert c["status"] == "ok"
    ue = c["user_expressions"]
    assert set(ue) == {"double", "bad", "text"}
    assert ue["double"]["status"] == "ok"
    assert ue["double"]["data"]["text/plain"] == "10"  # evaluated after the cell ran
    assert isinstance(ue["double"]["metadata"], dict)
    assert ue["text"]["data"]["text/plain"] == "'ueue'"
    assert ue["bad"]["status"] == "error"
    assert ue["bad"]["ename"] == "ZeroDivisionError"
    assert isinstance(ue["bad"]["evalue"], str)
    assert isinstance(ue["bad"]["traceback"], list)
    # user expressions publish nothing
    assert outputs(msgs) == []


def test_empty_cell(kc):
    reply, msgs = execute(kc, "")
    assert reply["content"]["status"] == "ok"
    assert outputs(msgs) == []
    reply, msgs = execute(kc, "# only a comment\n")
    assert reply["content"]["status"] == "ok"
    assert outputs(msgs) == []


def test_top_level_await(kc):
    reply, msgs = execute(kc, "import asyncio\nawait asyncio.sleep(0.01)")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert outputs(msgs) == []
    reply, msgs = execute(kc, "async def aw_f():\n    await asyncio.sleep(0.01)\n    return 41 + 1\nawait aw_f()")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert result_text(msgs) == "42"
    reply, msgs = execute(kc, "aw_v = await asyncio.sleep(0, result='done')\naw_v")
    assert result_text(msgs) == "'done'"


def test_busy_first_idle_last_for_every_kind_of_cell(kc):
    # execute() asserts busy first and idle last for each; here every kind of cell in a row
    for code in ["x_b = 1", "x_b", "print(x_b)", "raise ValueError(x_b)", "import sys; print(1, file=sys.stderr)"]:
        reply, msgs = execute(kc, code)
        assert msgs[0]["content"]["execution_state"] == "busy"
        assert msgs[-1]["content"]["execution_state"] == "idle"
