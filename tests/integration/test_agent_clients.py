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

import importlib.util
import time

import pytest

import pyctest
from pyctest import (IS_PYC, TIMEOUT, assert_alive, eval_value, execute, get_reply, ipykernel_falls_short, iopub_for,
                     pyc_only, result_text)

needs_ipython = pytest.mark.skipif(importlib.util.find_spec("IPython") is None, reason="IPython is not installed")


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


# ---- start-up files: PYTHONSTARTUP and IPython's profile start-up scripts -------------------------------


def _startup_dir(tmp_path, files):
    """An IPYTHONDIR whose profile_default/startup holds files ({name: text})."""
    ipdir = tmp_path / "ipython"
    startup = ipdir / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "README").write_text("IPython's own README: not a start-up file\n")
    for name, text in files.items():
        (startup / name).write_text(text)
    return ipdir


def test_startup_script_defines_a_name(tmp_path):
    """E2B's way: a profile start-up script runs in the user namespace before the first cell, and the
    scripts run in the order of their names."""
    ipdir = _startup_dir(tmp_path, {"10-second.py": "order.append('second')\n",
                                    "00-first.py": "order = ['first']\nfrom_startup = 42\n"})
    with pyctest.Kernel("pyc", env={"IPYTHONDIR": str(ipdir)}) as k:
        assert eval_value(k.kc, "from_startup") == "42"
        assert eval_value(k.kc, "order") == "['first', 'second']"
        assert eval_value(k.kc, "'__file__' in globals()") == "False"


def test_pythonstartup_runs_first(tmp_path):
    ipdir = _startup_dir(tmp_path, {"00-profile.py": "order.append('profile')\n"})
    ps = tmp_path / "pythonstartup.py"
    ps.write_text("order = ['PYTHONSTARTUP']\n")
    with pyctest.Kernel("pyc", env={"IPYTHONDIR": str(ipdir), "PYTHONSTARTUP": str(ps)}) as k:
        assert eval_value(k.kc, "order") == "['PYTHONSTARTUP', 'profile']"


def test_failing_startup_script_is_logged_and_the_kernel_works(tmp_path):
    """A start-up script that raises is reported in the kernel's log with its traceback; the scripts after
    it are not run (as in IPython), and the kernel works."""
    ipdir = _startup_dir(tmp_path, {"00-ok.py": "before = 1\n",
                                    "10-bad.py": "def f():\n    raise ValueError('startup boom')\nf()\n",
                                    "20-after.py": "after = 1\n"})
    with pyctest.Kernel("pyc", env={"IPYTHONDIR": str(ipdir)}) as k:
        assert_alive(k.kc)
        assert eval_value(k.kc, "(before, 'after' in globals())") == "(1, False)"
        if IS_PYC:
            log = k.stderr()
            assert "start-up file %s failed" % (ipdir / "profile_default" / "startup" / "10-bad.py") in log, log
            assert "ValueError: startup boom" in log and 'line 2, in f' in log, log


@pyc_only
def test_startup_does_not_import_ipython(tmp_path):
    """A start-up script that does not import IPython leaves it out of sys.modules; PYC_NO_STARTUP=1
    turns the start-up files off."""
    ps = tmp_path / "pythonstartup.py"
    ps.write_text("print('startup output goes to the log')\nfrom_ps = 1\n")
    ipdir = _startup_dir(tmp_path, {"00-a.py": "from_profile = 1\n"})
    env = {"IPYTHONDIR": str(ipdir), "PYTHONSTARTUP": str(ps)}
    with pyctest.Kernel("pyc", env=env) as k:
        assert eval_value(k.kc, "(from_ps, from_profile, 'IPython' in __import__('sys').modules)") == \
            "(1, 1, False)"
        assert "startup output goes to the log" in k.stderr()
    with pyctest.Kernel("pyc", env=dict(env, PYC_NO_STARTUP="1")) as k:
        assert eval_value(k.kc, "'from_ps' in globals() or 'from_profile' in globals()") == "False"


@needs_ipython
def test_ipy_startup_file(tmp_path):
    """A .ipy start-up file runs in the IPython shell (IPython syntax), and cells work after it."""
    ipdir = _startup_dir(tmp_path, {"50-magic.ipy": "ipy_value = 6 * 7\n%env PYC_FROM_IPY=yes\n"})
    with pyctest.Kernel("pyc", env={"IPYTHONDIR": str(ipdir)}) as k:
        assert eval_value(k.kc, "(ipy_value, __import__('os').environ['PYC_FROM_IPY'])") == "(42, 'yes')"
        reply, msgs = execute(k.kc, "1 + 1")
        assert result_text(msgs) == "2"


@pyc_only
def test_ipy_startup_file_without_ipython(tmp_path):
    """Without IPython (PYC_IPYTHON=0 here) a .ipy file is not run; the log says so in one line."""
    ipdir = _startup_dir(tmp_path, {"00-a.py": "a = 1\n", "50-magic.ipy": "%env PYC_FROM_IPY=yes\n"})
    with pyctest.Kernel("pyc", env={"IPYTHONDIR": str(ipdir), "PYC_IPYTHON": "0"}) as k:
        assert eval_value(k.kc, "(a, 'PYC_FROM_IPY' in __import__('os').environ)") == "(1, False)"
        assert "50-magic.ipy not run: it needs IPython" in k.stderr()


# ---- what frameworks send: %colors nocolor, %%bash, %pip; with IPython and without -----------------------


@pytest.fixture(scope="module")
def _no_ipython_kernel():
    k = pyctest.Kernel("pyc", env={"PYC_IPYTHON": "0"}) if IS_PYC else None
    yield k
    if k is not None:
        k.shutdown()


@pytest.fixture(params=["ipython", "no_ipython"])
def any_kc(request, kc, _no_ipython_kernel):
    """The module's kernel (IPython hosted when installed), and a pyc kernel with PYC_IPYTHON=0 (without
    IPython: pyc's own magics only)."""
    if request.param == "ipython":
        return kc
    if not IS_PYC:
        pytest.skip(pyctest.NOT_PYC_REASON)
    pyctest.drain(_no_ipython_kernel.kc, "iopub", quiet=0.01)
    return _no_ipython_kernel.kc


def _error_text(msgs):
    return "\n".join("\n".join(m["content"]["traceback"]) for m in msgs if m["msg_type"] == "error")


def test_colors_nocolor_makes_tracebacks_plain(any_kc):
    """OpenHands sends `%colors nocolor` first; the tracebacks after it carry no ANSI escapes, and another
    scheme brings the colors back."""
    reply, msgs = execute(any_kc, "%colors nocolor")
    assert reply["content"]["status"] == "ok", reply["content"]
    try:
        reply, msgs = execute(any_kc, "1/0")
        assert reply["content"]["ename"] == "ZeroDivisionError"
        text = _error_text(msgs)
        assert "ZeroDivisionError" in text and "\x1b[" not in text, repr(text)
    finally:
        reply, _ = execute(any_kc, "%colors Linux")
        assert reply["content"]["status"] == "ok", reply["content"]
    reply, msgs = execute(any_kc, "1/0")
    assert "\x1b[" in _error_text(msgs)


def test_colors_without_a_scheme_is_a_usage_error(any_kc):
    reply, _ = execute(any_kc, "%colors")
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "UsageError"


def test_bash_cell_streams_its_output(any_kc):
    """CAMEL runs shell cells with %%bash: the body is bash's script, stdout and stderr are streamed."""
    reply, msgs = execute(any_kc, "%%bash\nfor i in 1 2 3; do echo line $i; done\necho oops >&2\nx=ok; echo $x")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert pyctest.stream_text(msgs) == "line 1\nline 2\nline 3\nok\n"
    assert pyctest.stream_text(msgs, "stderr") == "oops\n"


def test_bash_cell_that_fails_raises(any_kc):
    """As IPython 8's %%bash: a non-zero exit raises CalledProcessError after the output, unless
    --no-raise-error."""
    reply, msgs = execute(any_kc, "%%bash\necho before\nexit 3")
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "CalledProcessError"
    assert "exit status 3" in reply["content"]["evalue"]
    assert pyctest.stream_text(msgs) == "before\n"
    reply, msgs = execute(any_kc, "%%bash --no-raise-error\necho before\nexit 3")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert pyctest.stream_text(msgs) == "before\n"


def test_bash_cell_with_a_long_script(any_kc):
    """A script longer than a pipe holds, whose output is longer too, does not deadlock."""
    body = "".join("echo %s\n" % ("x" * 100) for _ in range(2000))
    reply, msgs = execute(any_kc, "%%bash\n" + body)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert pyctest.stream_text(msgs) == ("x" * 100 + "\n") * 2000


@pytest.mark.skipif(importlib.util.find_spec("pip") is None, reason="pip is not installed")
def test_pip_runs_the_kernels_pip(any_kc):
    """OpenHands installs with %pip install: it runs sys.executable -m pip; here, without a network, its
    version and its own error for a package that is not there, and the kernel goes on."""
    reply, msgs = execute(any_kc, "%pip --version")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert pyctest.stream_text(msgs).startswith("pip ")
    reply, msgs = execute(any_kc, "%pip install --no-index --no-deps pyc-no-such-package-xyz", timeout=120)
    assert reply["content"]["status"] == "ok", reply["content"]
    err = pyctest.stream_text(msgs, "stderr") + pyctest.stream_text(msgs)
    assert "error" in err.lower(), err
    assert eval_value(any_kc, "6 * 7") == "42"


@pyc_only
def test_magics_leave_ipython_unimported(fresh_kernel):
    """pyc's own %colors, %%bash and %pip do not import IPython (its shell costs 200 ms)."""
    kc = fresh_kernel.kc
    for code in ("%colors NoColor", "%%bash\ntrue", "%pip --version", "%colors Linux"):
        reply, _ = execute(kc, code)
        assert reply["content"]["status"] == "ok", (code, reply["content"])
    assert eval_value(kc, "'IPython' in __import__('sys').modules") == "False"


# ---- a client that stops at the first idle -------------------------------------------------------------------


def test_a_client_that_stops_at_the_first_idle_gets_everything(kc):
    """Open Interpreter and CAMEL read iopub until the first idle whose parent is their request, then stop: every
    output of the request (also of a cell that printed from a thread and a subprocess, and of other request
    types) must have come before that idle, and the reply must come (before or after it)."""
    cells = [
        "print('a'); display({'text/plain': 'b'}, raw=True); 'c'",
        "import threading\nt = threading.Thread(target=lambda: print('from a thread'))\nt.start(); t.join()",
        "import subprocess\nsubprocess.run(['echo', 'from a subprocess'])\nNone",
        "import sys\nsys.stderr.write('err\\n'); 1/0",
    ]
    expected = [["stream:a\n", "display_data:b", "execute_result:'c'"], ["stream:from a thread\n"],
                ["stream:from a subprocess\n"], ["stream:err\n", "error:ZeroDivisionError"]]
    for code, want in zip(cells, expected):
        msg_id = kc.execute(code, stop_on_error=False)
        got = []
        while True:
            m = kc.get_iopub_msg(timeout=TIMEOUT)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            t = m["msg_type"]
            if t == "status" and m["content"]["execution_state"] == "idle":
                break
            if t == "stream":
                got.append("stream:" + m["content"]["text"])
            elif t in ("display_data", "execute_result"):
                got.append("%s:%s" % (t, m["content"]["data"]["text/plain"]))
            elif t == "error":
                got.append("error:" + m["content"]["ename"])
        assert got == want, (code, got)
        assert get_reply(kc, msg_id)["content"]["status"] in ("ok", "error")
    for msg_type, content in (("complete_request", {"code": "pri", "cursor_pos": 3}),
                              ("inspect_request", {"code": "print", "cursor_pos": 5, "detail_level": 0}),
                              ("kernel_info_request", {})):
        msg = kc.session.msg(msg_type, content)
        kc.shell_channel.send(msg)
        while True:
            m = kc.get_iopub_msg(timeout=TIMEOUT)
            if (m["parent_header"].get("msg_id") == msg["header"]["msg_id"] and m["msg_type"] == "status" and
                    m["content"]["execution_state"] == "idle"):
                break
        assert get_reply(kc, msg["header"]["msg_id"])["content"]["status"] == "ok"
