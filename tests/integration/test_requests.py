"""is_complete, comm_info, connect, unknown message types, and control while a cell runs (DESIGN.md
section 3)."""

import time
from queue import Empty

import pytest

from pyctest import assert_alive, get_reply, iopub_for, request, send, stream_text


def is_complete(kc, code, channel="shell"):
    reply, msgs = request(kc, "is_complete_request", {"code": code}, channel=channel)
    assert reply["msg_type"] == "is_complete_reply"
    return reply["content"]


@pytest.mark.parametrize("code", ["x = 1", "print('hi')", "import os", "def f():\n    return 1\n\n", "x = (1,\n     2)"])
def test_is_complete_complete(kc, code):
    assert is_complete(kc, code)["status"] == "complete"


@pytest.mark.parametrize(
    "code, indent",
    [
        ("for i in range(3):", "    "),
        ("def f():", "    "),
        ("if True:\n    if True:", "        "),
        ("for i in range(3):\n", "    "),
        ("if True:\n    if True:\n", "        "),
        ("x = (", None),
        ("s = '''abc", None),
    ],
)
def test_is_complete_incomplete(kc, code, indent):
    c = is_complete(kc, code)
    assert c["status"] == "incomplete", c
    assert isinstance(c.get("indent", ""), str)
    if indent is not None:
        assert c["indent"] == indent


@pytest.mark.parametrize("code", ["1 +* 2", "x = )", "import = 7q"])
def test_is_complete_invalid(kc, code):
    assert is_complete(kc, code)["status"] == "invalid"


def test_is_complete_on_control(kc):
    assert is_complete(kc, "for i in range(3):", channel="control")["status"] == "incomplete"


def test_comm_info(kc):
    reply, msgs = request(kc, "comm_info_request", {})
    assert reply["msg_type"] == "comm_info_reply"
    assert reply["content"] == {"status": "ok", "comms": {}}
    reply, msgs = request(kc, "comm_info_request", {"target_name": "nothing.here"})
    assert reply["content"]["status"] == "ok"
    assert reply["content"]["comms"] == {}


def test_comm_info_on_control(kc):
    reply, msgs = request(kc, "comm_info_request", {}, channel="control")
    assert reply["content"]["status"] == "ok"


def test_connect_request(kernel):
    kc = kernel.kc
    reply, msgs = request(kc, "connect_request", {})
    assert reply["msg_type"] == "connect_reply"
    c = reply["content"]
    info = kernel.km.get_connection_info()
    for port in ("shell_port", "iopub_port", "stdin_port", "hb_port", "control_port"):
        assert c[port] == info[port], (port, c)


def test_unknown_message_type(kc):
    msg_id = send(kc, "foo_request", {"what": "ever"})
    msgs = iopub_for(kc, msg_id)  # busy then idle
    assert [m["msg_type"] for m in msgs] == ["status", "status"]
    # no reply: the next shell reply is for the next request
    try:
        stray = kc.get_shell_msg(timeout=0.5)
    except Empty:
        stray = None
    assert stray is None or stray["parent_header"].get("msg_id") != msg_id, stray
    assert_alive(kc)


def test_control_answers_while_cell_runs(kc):
    msg_id = kc.execute("import time\ntime.sleep(3)\nprint('slept')")
    time.sleep(0.5)
    t0 = time.monotonic()
    ki = send(kc, "kernel_info_request", {}, channel="control")
    reply = get_reply(kc, ki, channel="control", timeout=10)
    took = time.monotonic() - t0
    assert reply["content"]["status"] == "ok"
    assert took < 2.0, "control kernel_info took %.1fs while a cell ran" % took
    exec_reply = get_reply(kc, msg_id)
    assert exec_reply["content"]["status"] == "ok"
    assert stream_text(iopub_for(kc, msg_id)) == "slept\n"


def test_requests_are_answered_in_order(kc):
    ids = [kc.execute("q_%d = %d" % (i, i)) for i in range(20)]
    ids.append(kc.kernel_info())
    ids.append(kc.execute("print(q_0 + q_19)"))
    order = []
    while len(order) < len(ids):
        m = kc.get_shell_msg(timeout=30)
        if m["parent_header"].get("msg_id") in ids:
            order.append(m["parent_header"]["msg_id"])
    assert order == ids
    msgs = iopub_for(kc, ids[-1])
    assert stream_text(msgs) == "19\n"
