"""What agent frameworks send, through jupyter_client (issue 17: "drop-in for agent frameworks").

Agent frameworks (Open Interpreter, OpenHands, E2B, CAMEL, ...) drive kernels through jupyter_server,
nbclient or jupyter_client directly, and send things a notebook never does:

- an input_reply nobody asked for (Open Interpreter), which must not answer a later input();
- headers without a date, with an empty date, or with an empty session;
- IPython's start-up configuration (profile start-up scripts, PYTHONSTARTUP);
- `%colors nocolor`, `%%bash` and `%pip`, with or without IPython installed.

Every test also runs against ipykernel (PYC_TEST_ARGV, see tests/pytest.sh); where ipykernel falls short
the test says so with pyctest's markers.
"""

import time

import pytest

from pyctest import IS_PYC, TIMEOUT, eval_value, execute, get_reply, ipykernel_falls_short, iopub_for


# ---- stdin: stale and foreign input_reply ------------------------------------------------------------------


def _wait_input_request(kc, msg_id):
    req = kc.get_stdin_msg(timeout=TIMEOUT)
    assert req["msg_type"] == "input_request"
    assert req["parent_header"]["msg_id"] == msg_id
    return req


def _reply_to(kc, value, parent_header):
    """Sends an input_reply whose parent_header is the given dict."""
    msg = kc.session.msg("input_reply", {"value": value}, parent=parent_header)
    kc.stdin_channel.send(msg)
    return msg


def _settle(kc):
    """Lets a message sent on stdin reach the kernel's socket before the next request on shell (the two
    channels are separate connections, so nothing orders them): a pause, then a round trip on shell."""
    time.sleep(0.3)
    execute(kc, "pass", store_history=False)


def test_stale_input_reply_does_not_answer_input(kernel):
    """Open Interpreter sends an input_reply when nothing asked for it; the next input() gets the answer
    to its own input_request, not the stale value (ipykernel drains stdin before each input_request)."""
    kc = kernel.kc
    kc.input("stale")                       # as jupyter_client sends it: no parent_header
    _reply_to(kc, "stale too", {"msg_id": "not-an-input-request", "msg_type": "input_request"})
    _settle(kc)
    msg_id = kc.execute("answer = input('? ')", allow_stdin=True)
    _wait_input_request(kc, msg_id)
    kc.input("real")
    reply = get_reply(kc, msg_id)
    iopub_for(kc, msg_id)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert eval_value(kc, "answer") == "'real'"
    if IS_PYC:
        lines = kernel.wait_stderr(lambda ls: sum("stale input_reply" in x for x in ls) >= 2)
        assert sum("stale input_reply" in x for x in lines) == 2, lines


@ipykernel_falls_short
def test_input_reply_to_another_request_is_ignored(kernel):
    """While input() waits, an input_reply whose parent is not the input_request is dropped (with a log
    line) and the one that answers it is taken.  ipykernel takes the first input_reply that comes."""
    kc = kernel.kc
    msg_id = kc.execute("answer = input('? ')", allow_stdin=True)
    req = _wait_input_request(kc, msg_id)
    _reply_to(kc, "foreign", {"msg_id": "some-other-request", "msg_type": "input_request"})
    time.sleep(0.2)
    _reply_to(kc, "real", req["header"])
    reply = get_reply(kc, msg_id)
    iopub_for(kc, msg_id)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert eval_value(kc, "answer") == "'real'"
    if IS_PYC:
        lines = kernel.wait_stderr(lambda ls: any("whose parent is not the input_request" in x for x in ls))
        assert any("whose parent is not the input_request" in x for x in lines), lines


def test_getpass_after_a_stale_reply(kernel):
    kc = kernel.kc
    kc.input("stale")
    _settle(kc)
    msg_id = kc.execute("import getpass\nsecret = getpass.getpass()", allow_stdin=True)
    req = _wait_input_request(kc, msg_id)
    assert req["content"]["password"] is True
    _reply_to(kc, "s3cret", req["header"])
    assert get_reply(kc, msg_id)["content"]["status"] == "ok"
    iopub_for(kc, msg_id)
    assert eval_value(kc, "secret") == "'s3cret'"


# ---- headers as agent clients send them ----------------------------------------------------------------


def _header_cases():
    def no_date(h):
        h.pop("date", None)

    def empty_date(h):
        h["date"] = ""

    def empty_session(h):
        h["session"] = ""

    def all_three(h):
        h.pop("date", None)
        h["session"] = ""

    return [no_date, empty_date, empty_session, all_three]


@pytest.mark.parametrize("edit", _header_cases(), ids=lambda f: f.__name__)
@pytest.mark.parametrize("msg_type,content", [
    ("kernel_info_request", {}),
    ("execute_request", {"code": "print(6 * 7)", "silent": False, "store_history": True,
                         "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}),
    ("complete_request", {"code": "pri", "cursor_pos": 3}),
], ids=["kernel_info", "execute", "complete"])
def test_request_headers_without_date_or_session(kc, edit, msg_type, content):
    """The reply answers the request, and its parent_header is the request's header as sent."""
    msg = kc.session.msg(msg_type, content)
    edit(msg["header"])
    sent = dict(msg["header"])
    kc.shell_channel.send(msg)
    msg_id = sent["msg_id"]
    reply = get_reply(kc, msg_id)
    msgs = iopub_for(kc, msg_id)
    assert reply["content"]["status"] == "ok", reply["content"]
    parent = reply["parent_header"]
    assert {k: v for k, v in parent.items() if k != "date"} == {k: v for k, v in sent.items() if k != "date"}
    if "date" not in sent:                  # ipykernel's Session fills one in; pyc echoes the header as sent
        assert "date" not in parent or not IS_PYC
    elif sent["date"] == "":
        assert parent["date"] == ""
    else:                                   # jupyter_client reads a date back as a datetime
        assert parent["date"] == sent["date"]
    if msg_type == "execute_request":
        assert [m["content"]["text"] for m in msgs if m["msg_type"] == "stream"] == ["42\n"]


def test_input_reply_header_without_date_or_session(kc):
    msg_id = kc.execute("answer = input('? ')", allow_stdin=True)
    req = _wait_input_request(kc, msg_id)
    msg = kc.session.msg("input_reply", {"value": "plain"}, parent=req["header"])
    msg["header"].pop("date", None)
    msg["header"]["session"] = ""
    kc.stdin_channel.send(msg)
    assert get_reply(kc, msg_id)["content"]["status"] == "ok"
    iopub_for(kc, msg_id)
    assert eval_value(kc, "answer") == "'plain'"
