"""Big outputs reach the client exactly (issue 33's data path): a multi-megabyte result, PNG, HTML, JSON and
stream text, with every kind of character in them, decode on the client to exactly what the cell made;
and the journal still hands `poll` the first MiB of a large output.  Speed is measured by bench/bench_data.py,
never here.  These run against ipykernel too (the comparison mode), except the journal's."""

import base64
import json

import pytest

import pyctest
from pyctest import IS_PYC, execute, get_reply, outputs, send, stream_text

# Every kind of character a JSON encoder treats apart: quotes, backslashes, the named escapes, other control
# characters (an ANSI color, NUL), DEL, slash, two- three- and four-byte UTF-8.
NASTY = 'a"b\\c\n\t\r\b\f\x1b[31m\x00\x7f/é€😀 '


def only(msgs, msg_type):
    found = outputs(msgs, msg_type)
    assert len(found) == 1, [m["msg_type"] for m in outputs(msgs)]
    return found[0]["content"]


def test_a_ten_megabyte_bytes_result(kc):
    reply, msgs = execute(kc, "b'x' * 10485760", timeout=120)
    assert reply["content"]["status"] == "ok"
    text = only(msgs, "execute_result")["data"]["text/plain"]
    assert text == repr(b"x" * 10485760)


def test_big_results_with_every_kind_of_character(kc):
    """A str and a bytes result (scalars: their text/plain is their repr) of megabytes."""
    reply, msgs = execute(kc, "%r * 40000" % NASTY, timeout=120)
    assert reply["content"]["status"] == "ok"
    assert only(msgs, "execute_result")["data"]["text/plain"] == repr(NASTY * 40000)
    reply, msgs = execute(kc, "bytes(range(256)) * 4096", timeout=120)
    assert reply["content"]["status"] == "ok"
    assert only(msgs, "execute_result")["data"]["text/plain"] == repr(bytes(range(256)) * 4096)


def test_bytes_shown_as_their_repr_whatever_they_hold(kc):
    """The text/plain of bytes (a result or a display) is exactly repr(): every byte value alone and beside
    each kind of quote (repr picks b"..." for bytes that hold ' and no "), runs longer than eight plain bytes
    with one special byte at each place, the empty bytes; a subclass goes by its own repr."""
    samples = [bytes([i]) for i in range(256)]
    samples += [bytes([i]) + q for i in range(256) for q in (b"'", b'"', b"'\"")]
    samples += [b"a" * k + bytes([c]) + b"b" * (17 - k) for k in range(18) for c in (0, 9, 34, 39, 92, 127, 128, 255)]
    samples += [b"", b"'" * 9, b'"' * 9, b"\\" * 9]
    reply, msgs = execute(kc, "class _B(bytes):\n    def __repr__(self): return 'mine'\n"
                              "for _x in %r + [_B(b'x')]: display(_x)" % samples, timeout=120)
    assert reply["content"]["status"] == "ok", reply["content"]
    shown = [m["content"]["data"]["text/plain"] for m in outputs(msgs, "display_data")]
    assert shown == [repr(x) for x in samples] + ["mine"]


def test_big_png_html_and_json_displays(kc):
    code = ("import random\n"
            "_r = random.Random(5)\n"
            "_png = b'\\x89PNG\\r\\n\\x1a\\n' + bytes(_r.getrandbits(8) for _ in range(3 * 1048576))\n"
            "_nasty = %r\n"
            "_html = '<table>' + ''.join('<tr><td>%%d &amp; %%s</td></tr>' %% (i, _nasty) for i in range(20000))"
            " + '</table>'\n"
            "_json = {'rows': [{'i': i, 'x': i / 7, 'big': 2 ** 40 + i, 's': _nasty, 'ok': i %% 2 == 0, 'none': None}\n"
            "                  for i in range(20000)]}\n"
            "class _Show:\n"
            "    def _repr_png_(self): return _png\n"
            "    def _repr_html_(self): return _html\n"
            "    def _repr_json_(self): return _json\n"
            "    def __repr__(self): return 'shown'\n"
            "display(_Show())\n"
            "_Show()\n") % NASTY
    reply, msgs = execute(kc, code, timeout=120)
    assert reply["content"]["status"] == "ok", reply["content"]
    import random

    r = random.Random(5)
    png = b"\x89PNG\r\n\x1a\n" + bytes(r.getrandbits(8) for _ in range(3 * 1048576))
    html = "<table>" + "".join("<tr><td>%d &amp; %s</td></tr>" % (i, NASTY) for i in range(20000)) + "</table>"
    rows = [{"i": i, "x": i / 7, "big": 2 ** 40 + i, "s": NASTY, "ok": i % 2 == 0, "none": None} for i in range(20000)]
    for content in (only(msgs, "display_data"), only(msgs, "execute_result")):
        data = content["data"]
        assert data["text/plain"] == "shown"
        assert base64.b64decode(data["image/png"]) == png
        assert data["text/html"] == html
        assert data["application/json"] == {"rows": rows}


def test_big_stream_text_with_every_kind_of_character(kc):
    reply, msgs = execute(kc, "import sys\n_t = %r * 100000\nsys.stdout.write(_t)\nprint(flush=True)" % NASTY,
                          timeout=120)
    assert reply["content"]["status"] == "ok"
    assert stream_text(msgs) == NASTY * 100000 + "\n"


@pytest.mark.skipif(not IS_PYC, reason="journal_request is pyc's own")
def test_the_journal_keeps_the_first_mib_of_a_big_output(kc):
    """What `pyc poll` shows of a cell that printed 5 MB at once: its first MiB, the last message kept cut on a
    whole character and marked, every byte of it the cell's own."""
    reply, _ = execute(kc, "print(%r * 200000)" % NASTY, timeout=120)
    assert reply["content"]["status"] == "ok"
    msg_id = send(kc, "journal_request", {"ids": [reply["parent_header"]["msg_id"]]}, channel="control")
    (c,) = get_reply(kc, msg_id, channel="control")["content"]["cells"]
    kept = "".join(o["content"]["text"] for o in c["outputs"])
    assert (NASTY * 200000 + "\n").startswith(kept)
    assert c["outputs"][-1].get("cut") is True
    size = len(json.dumps(c["outputs"], ensure_ascii=False, separators=(",", ":")).encode())
    assert (1 << 20) - 4096 < size <= (1 << 20) + 16, size
    assert c["outputs_dropped"] >= 1


def test_floats_are_written_as_python_writes_them(kc):
    """A float in display data is written as Python's json module writes it (its repr: 0.1, not
    0.10000000000000001), whatever jansson the kernel links; read from the raw iopub frame."""
    import re

    import zmq

    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    try:
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        info = kc.get_connection_info()
        sub.connect("%s://%s:%d" % (info["transport"], info["ip"], info["iopub_port"]))
        values = [0.1, 1 / 3, 1e300, -0.0, 2.5e-8, 123456789.125, 1e16, float(2 ** 70)]
        code = "display({'application/json': {'v': %r}}, raw=True)" % values if IS_PYC else \
            "from IPython.display import display\ndisplay({'application/json': {'v': %r}}, raw=True)" % values
        found = None
        for _ in range(50):                  # until the subscription has taken and a display reaches it
            reply, _ = execute(kc, code)
            assert reply["content"]["status"] == "ok", reply["content"]
            while found is None and sub.poll(500):
                frames = sub.recv_multipart()
                if b'"display_data"' in frames[-4]:     # the header, then parent, metadata, content
                    found = frames[-1].decode()
            if found is not None:
                break
        assert found is not None, "no display_data on iopub"
        text = re.search(r'"v":\s*\[([^\]]*)\]', found).group(1)
        assert [t.strip() for t in text.split(",")] == [json.dumps(v) for v in values]
    finally:
        sub.close(linger=0)
        ctx.term()
