"""What a notebook user expects beyond plain execution (issue 3), through jupyter_client: rich display,
matplotlib figures, display updates, clear_output, input()/getpass() over stdin, history across restarts,
completion, inspection, the IPython-style lines, and comms.  pyc does all of it without IPython."""

import base64
import os
import re
import struct
import time
import uuid

import pytest

import pyctest
from pyctest import (
    IS_PYC,
    NOT_PYC_REASON,
    PYC_SRCDIR,
    TIMEOUT,
    eval_value,
    execute,
    get_reply,
    iopub_for,
    outputs,
    request,
    send,
    stream_text,
)


def comm(kc, msg_type, content):
    """Sends a comm message (which has no reply) and returns its iopub messages, busy to idle."""
    return iopub_for(kc, send(kc, msg_type, content))

pyc_only = pytest.mark.skipif(not IS_PYC, reason=NOT_PYC_REASON)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def bundle(msgs, msg_type=("execute_result", "display_data")):
    outs = outputs(msgs, list(msg_type))
    assert outs, [m["msg_type"] for m in msgs]
    return outs[-1]["content"]


def test_pandas_dataframe_is_an_html_table(kc):
    pytest.importorskip("pandas")
    reply, msgs = execute(kc, "import pandas as pd\npd.DataFrame({'name': ['alpha', 'beta'], 'value': [1, 22]})")
    data = bundle(msgs)["data"]
    assert "<table" in data["text/html"] and "alpha" in data["text/html"]
    assert "alpha" in data["text/plain"]


def png_size(b64):
    raw = base64.b64decode(b64)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", raw[:8]
    return struct.unpack(">II", raw[16:24])


def test_matplotlib_figure_inline_as_png(kc):
    pytest.importorskip("matplotlib")
    reply, msgs = execute(kc, "import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3), dpi=50)\n"
                              "plt.plot([1, 3, 2]);")
    assert reply["content"]["status"] == "ok"
    pngs = [m["content"] for m in outputs(msgs, ["display_data"]) if "image/png" in m["content"]["data"]]
    assert len(pngs) == 1, [m["msg_type"] for m in msgs]
    w, h = png_size(pngs[0]["data"]["image/png"])
    assert 100 <= w <= 250 and 80 <= h <= 200, (w, h)
    # shown once: the next cell shows no figure again
    reply, msgs = execute(kc, "1")
    assert not [m for m in outputs(msgs, ["display_data"])]
    # plt.show() shows it at once, inside the cell
    reply, msgs = execute(kc, "plt.plot([1, 2]); plt.show(); print('after show')")
    kinds = [m["msg_type"] for m in outputs(msgs)]
    assert kinds == ["display_data", "stream"], kinds


def test_repr_protocol(kc):
    code = (
        "class R:\n"
        "    def _repr_markdown_(self): return '**md**'\n"
        "    def _repr_svg_(self): return '<svg></svg>'\n"
        "    def _repr_json_(self): return {'a': 1}, {'expanded': True}\n"
        "    def _repr_png_(self): return b'\\x89PNG fake'\n"
        "    def _repr_html_(self): raise ValueError('broken html')\n"
        "    def __repr__(self): return 'R()'\n"
        "R()"
    )
    reply, msgs = execute(kc, code)
    c = bundle(msgs)
    d = c["data"]
    assert d["text/plain"] == "R()"
    assert d["text/markdown"] == "**md**" and d["image/svg+xml"] == "<svg></svg>"
    assert d["application/json"] == {"a": 1} and c["metadata"]["application/json"] == {"expanded": True}
    assert base64.b64decode(d["image/png"]) == b"\x89PNG fake"
    assert "text/html" not in d
    reply, msgs = execute(kc, "class M:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n"
                              "        return {'text/html': '<i>m</i>', 'text/plain': 'M!'}\nM()")
    assert bundle(msgs)["data"] == {"text/html": "<i>m</i>", "text/plain": "M!"}


# pyc's display functions, IPython's under another kernel (the same calls)
DISPLAY_IMPORT = ("try:\n    from pyc import {0}\nexcept ImportError:\n    from IPython.display import {0}\n")


def test_display_and_updates(kc):
    reply, msgs = execute(kc, DISPLAY_IMPORT.format("display, update_display") +
                              "h = display('first', display_id=True)\n"
                              "display({'text/plain': 'raw'}, raw=True)\n"
                              "h.update('second')\n"
                              "update_display('third', display_id=h.display_id)")
    assert reply["content"]["status"] == "ok"
    outs = outputs(msgs, ["display_data", "update_display_data"])
    kinds = [m["msg_type"] for m in outs]
    assert kinds == ["display_data", "display_data", "update_display_data", "update_display_data"], kinds
    did = outs[0]["content"]["transient"]["display_id"]
    assert did and outs[2]["content"]["transient"]["display_id"] == did
    assert [m["content"]["data"]["text/plain"] for m in outs] == ["'first'", "raw", "'second'", "'third'"]


def test_clear_output(kc):
    reply, msgs = execute(kc, DISPLAY_IMPORT.format("clear_output") + "print('x')\nclear_output(wait=True)\nprint('y')")
    kinds = [(m["msg_type"], m["content"].get("wait")) for m in outputs(msgs)]
    assert kinds == [("stream", None), ("clear_output", True), ("stream", None)], kinds


def run_with_input(kc, code, answer, expect_password):
    msg_id = kc.execute(code, allow_stdin=True)
    req = kc.get_stdin_msg(timeout=TIMEOUT)
    assert req["msg_type"] == "input_request"
    assert req["parent_header"]["msg_id"] == msg_id
    assert req["content"]["password"] is expect_password
    kc.input(answer)
    return req, get_reply(kc, msg_id)


def test_input_round_trip(kc):
    req, reply = run_with_input(kc, "name = input('Your name? ')", "Ada", False)
    assert req["content"]["prompt"] == "Your name? "
    assert reply["content"]["status"] == "ok"
    assert eval_value(kc, "name") == "'Ada'"


def test_getpass_round_trip(kc):
    req, reply = run_with_input(kc, "import getpass\nsecret = getpass.getpass()", "s3cret", True)
    assert reply["content"]["status"] == "ok"
    assert eval_value(kc, "secret") == "'s3cret'"


@pytest.mark.skipif(not IS_PYC, reason="pyc's getpass; ipykernel's takes prompt and stream only")
def test_getpass_takes_echo_char_and_is_set_when_first_imported(fresh_kernel):
    """Python 3.14's getpass takes echo_char; pyc's asks the frontend whatever it is.  getpass is not imported
    at start: the kernel's getpass is set when a cell first imports it, and again after a reload."""
    kc = fresh_kernel.kc
    assert eval_value(kc, "'getpass' in __import__('sys').modules") == "False"
    code = "import getpass, importlib\nimportlib.reload(getpass)\nsecret = getpass.getpass('pw: ', echo_char='*')"
    req, reply = run_with_input(kc, code, "s3cret", True)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert eval_value(kc, "secret") == "'s3cret'"


def test_input_without_stdin_is_a_clear_error(kc):
    reply, msgs = execute(kc, "input('x')", allow_stdin=False)
    assert reply["content"]["status"] == "error"
    assert "stdin" in reply["content"]["evalue"].lower() or "StdinNotImplemented" in reply["content"]["ename"]


def test_interrupt_while_waiting_for_input(fresh_kernel):
    kc = fresh_kernel.kc
    msg_id = kc.execute("answer = input('?')", allow_stdin=True)
    kc.get_stdin_msg(timeout=TIMEOUT)
    fresh_kernel.km.interrupt_kernel()
    reply = get_reply(kc, msg_id)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert eval_value(kc, "1 + 1") == "2"


@pyc_only
def test_history_survives_restart(fresh_kernel):
    kc = fresh_kernel.kc
    marker = "hist_%s" % uuid.uuid4().hex[:8]
    execute(kc, "%s = 1" % marker)
    reply, _ = request(kc, "history_request", {"hist_access_type": "tail", "n": 5, "output": False, "raw": True})
    first = [h for h in reply["content"]["history"] if h[2] == "%s = 1" % marker]
    assert len(first) == 1
    session = first[0][0]
    fresh_kernel.restart()
    kc = fresh_kernel.kc
    execute(kc, "after_restart = 2")
    reply, _ = request(kc, "history_request", {"hist_access_type": "search", "pattern": "%s*" % marker,
                                               "output": False, "raw": True, "unique": True})
    assert [h[:2] for h in reply["content"]["history"]] == [first[0][:2]]
    reply, _ = request(kc, "history_request", {"hist_access_type": "tail", "n": 1, "output": False, "raw": True})
    assert reply["content"]["history"][-1][0] == session + 1
    reply, _ = request(kc, "history_request", {"hist_access_type": "range", "session": -1, "start": 0,
                                               "stop": None, "output": False, "raw": True})
    assert ["%s = 1" % marker] == [h[2] for h in reply["content"]["history"] if marker in h[2]]


def test_completion(kc):
    execute(kc, "import os\ncomplete_me = {'key_one': 1}")
    reply, _ = request(kc, "complete_request", {"code": "os.pa", "cursor_pos": 5})
    c = reply["content"]
    assert "os.path".split(".")[1] in [m.split(".")[-1] for m in c["matches"]]
    assert (c["cursor_start"], c["cursor_end"]) == (3, 5)
    reply, _ = request(kc, "complete_request", {"code": "complete_me['key_", "cursor_pos": 17})
    assert any("key_one" in m for m in reply["content"]["matches"]), reply["content"]
    # cursor_pos counts code points, not bytes
    code = "é = 'ü'; comp"
    reply, _ = request(kc, "complete_request", {"code": code, "cursor_pos": len(code)})
    c = reply["content"]
    assert "complete_me" in c["matches"] and c["cursor_end"] == len(code) and c["cursor_start"] == len(code) - 4


def test_inspection(kc):
    reply, _ = request(kc, "inspect_request", {"code": "len", "cursor_pos": 3, "detail_level": 0})
    c = reply["content"]
    assert c["status"] == "ok" and c["found"] is True
    assert "Return the number of items" in c["data"]["text/plain"]
    reply, _ = request(kc, "inspect_request", {"code": "no_such_name_here", "cursor_pos": 5, "detail_level": 0})
    assert reply["content"]["found"] is False
    execute(kc, "def documented(a, b=2):\n    'Adds.'\n    return a + b")
    reply, _ = request(kc, "inspect_request", {"code": "documented(", "cursor_pos": 11, "detail_level": 1})
    text = ANSI.sub("", reply["content"]["data"]["text/plain"])     # IPython colors it
    assert "Adds." in text and "return a + b" in text


@pyc_only
def test_ipython_style_lines(kc):
    reply, msgs = execute(kc, "!echo from-the-shell")
    assert "from-the-shell" in "".join(m["content"]["text"] for m in outputs(msgs, ["stream"]))
    reply, msgs = execute(kc, "%pwd")
    assert bundle(msgs)["data"]["text/plain"] == repr(eval(eval_value(kc, "__import__('os').getcwd()")))
    reply, msgs = execute(kc, "len?")
    pages = [p for p in reply["content"]["payload"] if p.get("source") == "page"]
    assert pages and "Return the number of items" in pages[0]["data"]["text/plain"]
    reply, msgs = execute(kc, "%nosuchmagic 1")
    assert reply["content"]["status"] == "error"
    # IPython's own answer when it is installed (it runs the magics pyc does not have), pyc's list otherwise
    assert ("%nosuchmagic` not found" in reply["content"]["evalue"] or "%time" in reply["content"]["evalue"]), \
        reply["content"]
    # plain Python is never touched
    assert eval_value(kc, "7 % 3") == "1"


@pyc_only
def test_comms_both_ways(kc):
    execute(kc, "from pyc._comm import get_comm_manager\nreceived = []\n"
                "def target(comm, msg):\n"
                "    received.append(msg['content']['data'])\n"
                "    comm.on_msg(lambda m: (received.append(m['content']['data']), comm.send({'echo': m['content']['data']})))\n"
                "get_comm_manager().register_target('test.echo', target)")
    cid = uuid.uuid4().hex
    comm(kc, "comm_open", {"comm_id": cid, "target_name": "test.echo", "data": {"hello": 1}})
    reply, msgs = request(kc, "comm_info_request", {"target_name": "test.echo"})
    assert reply["content"]["comms"] == {cid: {"target_name": "test.echo"}}
    msgs = comm(kc, "comm_msg", {"comm_id": cid, "data": {"x": 2}})
    echoes = [m["content"] for m in msgs if m["msg_type"] == "comm_msg"]
    assert echoes == [{"comm_id": cid, "data": {"echo": {"x": 2}}}], echoes
    assert eval_value(kc, "received") == "[{'hello': 1}, {'x': 2}]"
    comm(kc, "comm_close", {"comm_id": cid, "data": {}})
    reply, _ = request(kc, "comm_info_request", {})
    assert cid not in reply["content"]["comms"]
    # a target nobody registered is closed at once
    msgs = comm(kc, "comm_open", {"comm_id": "x1", "target_name": "nobody.home", "data": {}})
    assert [m["msg_type"] for m in msgs if m["msg_type"].startswith("comm")] == ["comm_close"]
    # Python opens a comm (through the comm package when it is installed)
    reply, msgs = execute(kc, "try:\n    import comm as _c\n    c = _c.create_comm(target_name='from.kernel', data={'v': 1})\n"
                              "except ImportError:\n    from pyc._comm import Comm\n    c = Comm(target_name='from.kernel', data={'v': 1})\n"
                              "c.send({'w': 2}, buffers=[b'raw bytes'])")
    comm_msgs = [m for m in msgs if m["msg_type"].startswith("comm")]
    assert [m["msg_type"] for m in comm_msgs] == ["comm_open", "comm_msg"]
    assert comm_msgs[0]["content"]["target_name"] == "from.kernel"
    assert comm_msgs[1]["buffers"][0].tobytes() == b"raw bytes"


@pyc_only
def test_comms_open_at_once_are_bounded():
    """At most PYC_MAX_COMMS comms are open at once: one more opened in a cell raises CommLimitError (nothing is
    published for it), one more opened by the frontend is answered with comm_close and a line on stderr; a
    comm closed makes room."""
    k = pyctest.Kernel("pyc", env={"PYC_MAX_COMMS": "3"})
    try:
        kc = k.kc
        execute(kc, "from pyc._comm import Comm, get_comm_manager\n"
                    "get_comm_manager().register_target('test.sink', lambda comm, msg: None)\n"
                    "c1, c2 = Comm(target_name='a'), Comm(target_name='b')")
        msgs = comm(kc, "comm_open", {"comm_id": "f1", "target_name": "test.sink", "data": {}})
        assert not [m for m in msgs if m["msg_type"] == "comm_close"]
        reply, msgs = execute(kc, "Comm(target_name='c')", check=False)
        assert reply["content"]["ename"] == "CommLimitError", reply["content"]
        assert "3 comms are open at once" in reply["content"]["evalue"] and "PYC_MAX_COMMS" in reply["content"]["evalue"]
        assert not [m for m in msgs if m["msg_type"] == "comm_open"]
        msgs = comm(kc, "comm_open", {"comm_id": "f2", "target_name": "test.sink", "data": {}})
        closes = [m["content"] for m in msgs if m["msg_type"] == "comm_close"]
        assert closes == [{"comm_id": "f2", "data": {}}], closes
        assert "PYC_MAX_COMMS" in stream_text(msgs, "stderr")
        reply, _ = request(kc, "comm_info_request", {})
        assert sorted(c["target_name"] for c in reply["content"]["comms"].values()) == ["a", "b", "test.sink"]
        execute(kc, "c1.close()\nc3 = Comm(target_name='c')")
        reply, _ = request(kc, "comm_info_request", {})
        assert sorted(c["target_name"] for c in reply["content"]["comms"].values()) == ["b", "c", "test.sink"]
    finally:
        k.shutdown(now=True)


@pytest.mark.slow   # a whole notebook (README's first Quick start command runs it too)
def test_rich_output_example_notebook(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    nb = nbformat.read(os.path.join(PYC_SRCDIR, "examples", "rich_output.ipynb"), as_version=4)
    if not IS_PYC:
        # pyc's example: another kernel takes the same display functions from IPython
        for cell in nb.cells:
            cell.source = cell.source.replace("from pyc import", "from IPython.display import")
    NotebookClient(nb, kernel_name="pyc", timeout=120).execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    mimes = set(k for o in outs for k in o.get("data", {}))
    assert {"text/html", "image/png", "text/markdown"} <= mimes, mimes
    assert not [o for o in outs if o.output_type == "error"]


@pyc_only
def test_input_request_reaches_a_stdin_channel_that_connects_late(fresh_kernel):
    """A client whose stdin channel connects after the cell asked (a slow connection on a loaded machine) still
    gets the input_request: a ROUTER drops a message for a peer it does not know yet without a word, so pyc
    tries again until the peer is there (ipykernel's input() waits for ever)."""
    fresh_kernel.kc.stop_channels()     # its stdin socket has the identity km.client()'s will have
    kc = fresh_kernel.km.client()
    kc.start_channels(shell=True, iopub=True, stdin=False, hb=False)
    try:
        msg_id = kc.execute("answer = input('late? ')", allow_stdin=True)
        time.sleep(0.5)
        kc.start_channels(shell=False, iopub=False, stdin=True, hb=False)
        req = kc.get_stdin_msg(timeout=TIMEOUT)
        assert req["msg_type"] == "input_request" and req["content"]["prompt"] == "late? "
        kc.input("yes")
        reply = get_reply(kc, msg_id)
        assert reply["content"]["status"] == "ok", reply["content"]
        assert eval_value(kc, "answer") == "'yes'"
    finally:
        kc.stop_channels()


@pyc_only
def test_input_with_no_stdin_channel_is_an_error_not_a_wait_for_ever():
    """allow_stdin true but no stdin channel at all: the input_request cannot be delivered, and after
    PYC_STDIN_WAIT seconds (here 0.5) input() raises an error that says so; the kernel goes on."""
    k = pyctest.Kernel("pyc", env={"PYC_STDIN_WAIT": "0.5"})
    try:
        k.kc.stop_channels()     # its stdin socket has the identity km.client()'s will have
        kc = k.km.client()
        kc.start_channels(shell=True, iopub=True, stdin=False, hb=False)
        try:
            msg_id = kc.execute("input('nobody? ')", allow_stdin=True)
            reply = get_reply(kc, msg_id, timeout=TIMEOUT)
            assert reply["content"]["status"] == "error"
            assert "input_request" in reply["content"]["evalue"], reply["content"]
            assert eval_value(kc, "1 + 1") == "2"
        finally:
            kc.stop_channels()
        assert any("no frontend is connected to the stdin channel; input() gave up after 0.5 s" in line
                   for line in k.stderr_lines())
    finally:
        k.shutdown(now=True)


@pyc_only
def test_an_interrupt_ends_the_wait_for_a_stdin_channel(fresh_kernel):
    """While input() waits for a stdin connection that is not there, an interrupt ends the wait as it ends the
    wait for a reply: KeyboardInterrupt, not the error input() gives when it gives up."""
    fresh_kernel.kc.stop_channels()
    kc = fresh_kernel.km.client()
    kc.start_channels(shell=True, iopub=True, stdin=False, hb=False)
    try:
        msg_id = kc.execute("input('nobody? ')", allow_stdin=True)
        time.sleep(0.5)
        fresh_kernel.km.interrupt_kernel()
        reply = get_reply(kc, msg_id)
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "KeyboardInterrupt", reply["content"]
        assert eval_value(kc, "1 + 1") == "2"
    finally:
        kc.stop_channels()
