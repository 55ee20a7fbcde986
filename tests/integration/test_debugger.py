"""The debugger (DAP over debug_request / debug_reply on control, debug_event on iopub), driven with the
messages JupyterLab's debugger sends, written by hand: jupyter_client only carries them.

A full session: a breakpoint in a function defined by an earlier cell, the stopped event, the stack, the
variables, a rich inspection of a DataFrame while stopped, a step, continue, and the cell finishing with
its output; control answering kernel_info while the cell is stopped; an exception breakpoint; the variable
explorer while no cell runs; copyToGlobals; bad and early requests answered, never left hanging; a second
session after a disconnect.  The same tests run against ipykernel (PYC_TEST_ARGV) to check the tests.
"""

import itertools

import pytest

from pyctest import (IS_PYC, TIMEOUT, Deadline, assert_alive, execute, get_reply, ipykernel_falls_short,
                     ipykernel_falls_short_before, pyc_only)

pytest.importorskip("debugpy")

_seq = itertools.count(1)

INIT_ARGS = {
    "clientID": "jupyterlab", "clientName": "JupyterLab", "adapterID": "python", "pathFormat": "path",
    "linesStartAt1": True, "columnsStartAt1": True, "supportsVariableType": True, "supportsVariablePaging": True,
    "supportsRunInTerminalRequest": True, "locale": "en",
}

FUNC = "def f(a, b):\n    c = a + b\n    return c\n"


def dap(kc, command, arguments=None, timeout=TIMEOUT):
    """Sends one DAP request in a debug_request and returns the debug_reply's content (the DAP response)."""
    content = {"type": "request", "seq": next(_seq), "command": command, "arguments": arguments or {}}
    msg = kc.session.msg("debug_request", content)
    kc.control_channel.send(msg)
    reply = get_reply(kc, msg["header"]["msg_id"], channel="control", timeout=timeout)
    assert reply["msg_type"] == "debug_reply"
    if IS_PYC:
        # Every answer is a whole DAP response to this request.  ipykernel 6.17 falls short twice: modules
        # has no "type", and richInspectVariables while stopped is answered with its own evaluate's seq.
        assert reply["content"]["type"] == "response"
        assert reply["content"]["request_seq"] == content["seq"]
    return reply["content"]


def wait_event(kc, name, timeout=TIMEOUT):
    """The next debug_event named name on iopub (other messages are skipped)."""
    dl = Deadline(timeout)
    while True:
        msg = kc.get_iopub_msg(timeout=dl.left())
        if msg["msg_type"] == "debug_event" and msg["content"].get("event") == name:
            return msg


def reply_to(kc, msg_id, timeout=TIMEOUT):
    return get_reply(kc, msg_id, timeout=timeout)


@pytest.fixture
def session(fresh_kernel):
    """A kernel of its own with a debug session attached, as JupyterLab starts one; disconnected after.  (Of
    its own so that the same tests run against ipykernel, which cannot start a second session.)"""
    kc = fresh_kernel.kc
    r = dap(kc, "initialize", INIT_ARGS)
    assert r["success"], r
    r = dap(kc, "attach")
    assert r["success"], r
    try:
        yield kc
    finally:
        dap(kc, "setExceptionBreakpoints", {"filters": []})
        dap(kc, "disconnect", {"restart": False, "terminateDebuggee": False})
        assert_alive(kc)


@pyc_only
def test_kernel_info_offers_the_debugger(kernel):
    info = kernel.kernel_info()
    assert info["debugger"] is True
    if IS_PYC:
        assert "debugger" in info["supported_features"]


def test_debug_info_announces_how_cells_are_named(kernel):
    r = dap(kernel.kc, "debugInfo")
    assert r["success"]
    body = r["body"]
    assert body["hashMethod"] == "Murmur2" and isinstance(body["hashSeed"], int)
    assert body["tmpFilePrefix"].endswith("/") and body["tmpFileSuffix"] == ".py"
    assert body["richRendering"] is True and body["exceptionPaths"] == ["Python Exceptions"]


def _stop_in_f(kc):
    """Defines f in one cell, sets a breakpoint on its line 2, and runs a cell that calls it; returns the
    execute msg_id and the stopped event."""
    reply, _ = execute(kc, FUNC)
    assert reply["content"]["status"] == "ok"
    r = dap(kc, "dumpCell", {"code": FUNC})
    assert r["success"]
    source = r["body"]["sourcePath"]
    with open(source) as fh:
        assert fh.read() == FUNC
    r = dap(kc, "setBreakpoints", {"breakpoints": [{"line": 2}], "source": {"path": source},
                                   "sourceModified": False})
    assert r["success"] and r["body"]["breakpoints"][0]["verified"], r
    info = dap(kc, "debugInfo")["body"]
    assert source in [b["source"] for b in info["breakpoints"]]
    assert info["isStarted"] is True
    assert dap(kc, "configurationDone")["success"]
    msg_id = kc.execute("import pandas as pd\ndf = pd.DataFrame({'x': [1, 2]})\nr = f(2, 3)\nprint('r =', r)")
    stopped = wait_event(kc, "stopped")
    assert stopped["content"]["body"]["reason"] == "breakpoint"
    return msg_id, stopped, source


def test_full_session(session):
    kc = session
    msg_id, stopped, source = _stop_in_f(kc)
    thread = stopped["content"]["body"]["threadId"]
    assert thread in dap(kc, "debugInfo")["body"]["stoppedThreads"]

    # control answers while the cell is stopped
    req = kc.session.msg("kernel_info_request", {})
    kc.control_channel.send(req)
    assert get_reply(kc, req["header"]["msg_id"], channel="control", timeout=10)["msg_type"] == "kernel_info_reply"

    frames = dap(kc, "stackTrace", {"threadId": thread})["body"]["stackFrames"]
    assert frames[0]["name"] == "f" and frames[0]["line"] == 2
    assert frames[0]["source"]["path"] == source
    assert frames[-1]["name"] == "<module>"          # the calling cell, and nothing of the kernel below it
    scopes = dap(kc, "scopes", {"frameId": frames[0]["id"]})["body"]["scopes"]
    local_ref = next(s for s in scopes if s["name"] == "Locals")["variablesReference"]
    local = {v["name"]: v["value"] for v in dap(kc, "variables", {"variablesReference": local_ref})["body"]["variables"]}
    assert local["a"] == "2" and local["b"] == "3"

    # rich inspection while stopped: a local, and a DataFrame of the calling cell's frame
    r = dap(kc, "richInspectVariables", {"variableName": "a", "frameId": frames[0]["id"]})
    assert r["success"] and r["body"]["data"]["text/plain"] == "2"
    r = dap(kc, "richInspectVariables", {"variableName": "df", "frameId": frames[-1]["id"]})
    assert r["success"], r
    assert "text/html" in r["body"]["data"] and "<table" in r["body"]["data"]["text/html"]

    r = dap(kc, "evaluate", {"expression": "a * 10", "frameId": frames[0]["id"], "context": "repl"})
    assert r["success"] and r["body"]["result"] == "20"

    # step over line 2: stopped again on line 3, where c exists
    assert dap(kc, "next", {"threadId": thread})["success"]
    wait_event(kc, "stopped")
    frames = dap(kc, "stackTrace", {"threadId": thread})["body"]["stackFrames"]
    assert frames[0]["line"] == 3

    assert dap(kc, "continue", {"threadId": thread})["success"]
    reply = reply_to(kc, msg_id)
    assert reply["content"]["status"] == "ok"
    if IS_PYC:
        # ipykernel 6.17 still lists the threads as stopped here
        assert dap(kc, "debugInfo")["body"]["stoppedThreads"] == []
    reply, msgs = execute(kc, "print(r)")
    assert "5" in "".join(m["content"].get("text", "") for m in msgs)
    # the breakpoint still holds for the next call... until it is cleared
    dap(kc, "setBreakpoints", {"breakpoints": [], "source": {"path": source}, "sourceModified": False})
    reply, _ = execute(kc, "f(1, 1)")
    assert reply["content"]["status"] == "ok"


def test_exception_breakpoint(session):
    kc = session
    r = dap(kc, "setExceptionBreakpoints", {"filters": ["raised"]})
    assert r["success"], r
    dap(kc, "configurationDone")
    msg_id = kc.execute("def g():\n    raise ValueError('boom')\n\ng()")
    stopped = wait_event(kc, "stopped")
    assert stopped["content"]["body"]["reason"] == "exception"
    thread = stopped["content"]["body"]["threadId"]
    r = dap(kc, "exceptionInfo", {"threadId": thread})
    assert r["success"] and "ValueError" in r["body"]["exceptionId"]
    dap(kc, "setExceptionBreakpoints", {"filters": []})
    dap(kc, "continue", {"threadId": thread})
    reply = reply_to(kc, msg_id)
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "ValueError"


def test_variable_explorer_while_idle(session):
    kc = session
    execute(kc, "text = 'Hello the world'\nnums = [1, 2, 3]")
    r = dap(kc, "inspectVariables")
    assert r["success"]
    by_name = {v["name"]: v for v in r["body"]["variables"]}
    assert "text" in by_name and "nums" in by_name
    assert "In" not in by_name and "Out" not in by_name and "__builtins__" not in by_name
    children = dap(kc, "variables", {"variablesReference": by_name["nums"]["variablesReference"]})
    assert [v["value"] for v in children["body"]["variables"] if v["name"] in ("0", "1", "2")] == ["1", "2", "3"]
    r = dap(kc, "richInspectVariables", {"variableName": "text"})
    assert r["body"]["data"] == {"text/plain": "'Hello the world'"}
    r = dap(kc, "modules")
    assert any(m["name"] == "json" or m["name"].startswith("encodings") for m in r["body"]["modules"])


@ipykernel_falls_short_before((6, 21))     # copyToGlobals came in ipykernel 6.21
def test_copy_to_globals(session):
    kc = session
    msg_id, stopped, _ = _stop_in_f(kc)
    thread = stopped["content"]["body"]["threadId"]
    frames = dap(kc, "stackTrace", {"threadId": thread})["body"]["stackFrames"]
    r = dap(kc, "copyToGlobals", {"srcVariableName": "a", "dstVariableName": "a_copy",
                                  "srcFrameId": frames[0]["id"]})
    assert r["success"], r
    dap(kc, "setBreakpoints", {"breakpoints": [], "source": {"path": frames[0]["source"]["path"]}})
    dap(kc, "continue", {"threadId": thread})
    reply_to(kc, msg_id)
    reply, msgs = execute(kc, "a_copy")
    assert any(m["msg_type"] == "execute_result" and m["content"]["data"]["text/plain"] == "2" for m in msgs)


@pyc_only
def test_bad_and_early_requests_get_answers(kernel):
    kc = kernel.kc
    # no command, no seq: a failed response, not silence
    msg = kc.session.msg("debug_request", {"type": "request"})
    kc.control_channel.send(msg)
    rep = get_reply(kc, msg["header"]["msg_id"], channel="control")
    assert rep["content"]["success"] is False
    # a command that needs a session, before initialize
    r = dap(kc, "stackTrace", {"threadId": 1})
    assert r["success"] is False and "initialize" in r["message"]
    # a name that is not a Python name is not evaluated
    r = dap(kc, "richInspectVariables", {"variableName": "__import__('os').system('true')"})
    assert r["success"] is False
    assert_alive(kc)


@ipykernel_falls_short
def test_second_session_after_disconnect(kernel):
    # JupyterLab's debugger switched off and on again; the second initialize never gets a reply from ipykernel
    # (6.17 and 7.2)
    kc = kernel.kc
    for _ in range(2):
        assert dap(kc, "initialize", INIT_ARGS)["success"]
        assert dap(kc, "attach")["success"]
        r = dap(kc, "evaluate", {"expression": "'a' + 'b'", "context": "repl"})
        assert r["success"]
        dap(kc, "disconnect", {"restart": False, "terminateDebuggee": True})
    assert_alive(kc)        # the kernel is the debuggee, and is never terminated by the debugger
