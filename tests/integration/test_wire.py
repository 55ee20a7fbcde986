"""Bad input on the raw sockets (DESIGN.md section 2, Wire).

Frames are built by hand with pyzmq and jupyter_client.session.Session and sent from a DEALER socket of our
own, so that replies (if any) come back to that socket only.  After each bad message the kernel must still
answer kernel_info and execute on the normal client.

pyc only: each dropped message gives exactly one log line on the kernel's stderr that starts with
"pyc-kernel: " and contains "dropped" and a key word of the reason (case-insensitive), e.g.
    pyc-kernel: shell: dropped message: invalid signature
"""

import json
import re
import time

import pytest
import zmq
from jupyter_client.session import DELIM, Session

from pyctest import IS_PYC, assert_alive, ipykernel_falls_short

# reason -> accepted key words (any of them, case-insensitive) in pyc's "dropped" log line
REASONS = {
    "bad_signature": ("signature", "unsigned"),
    "replay": ("replay", "duplicate"),
    "too_few_frames": ("frame",),
    "no_delimiter": ("delimiter", "<ids|msg>"),
    "invalid_json": ("json",),
    "no_msg_type": ("msg_type",),
}


class Raw:
    def __init__(self, kernel, channel="shell"):
        info = kernel.km.get_connection_info()
        self.kernel = kernel
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.linger = 0
        port = info["%s_port" % channel]
        if info["transport"] == "tcp":
            url = "tcp://%s:%d" % (info["ip"], port)
        else:
            url = "%s://%s-%d" % (info["transport"], info["ip"], port)
        self.sock.connect(url)
        key = info["key"]
        self.session = Session(key=key if isinstance(key, bytes) else key.encode(), signature_scheme=info["signature_scheme"])

    def close(self):
        self.sock.close(0)
        self.ctx.term()

    def frames(self, msg_type="kernel_info_request", content=None):
        msg = self.session.msg(msg_type, content or {})
        return msg, list(self.session.serialize(msg))

    def signed(self, header, parent=b"{}", metadata=b"{}", content=b"{}"):
        parts = [header, parent, metadata, content]
        return [DELIM, self.session.sign(parts)] + parts

    def recv_all(self, wait=1.0):
        out = []
        while self.sock.poll(int(wait * 1000)):
            out.append(self.sock.recv_multipart())
            wait = 0.3
        return out

    def replies_to(self, frames_list):
        """msg_ids of the parents of the received frames."""
        out = []
        for frames in frames_list:
            _, parts = self.session.feed_identities(frames)
            msg = self.session.deserialize(parts, content=True)
            out.append(msg["parent_header"].get("msg_id"))
        return out


@pytest.fixture
def raw(kernel):
    r = Raw(kernel)
    yield r
    r.close()


def dropped_lines(kernel, start):
    return [ln for ln in kernel.stderr_lines()[start:] if "dropped" in ln.lower()]


def check_dropped_log(kernel, start, reason):
    """pyc only: one stderr line for the dropped message, with the reason."""
    if not IS_PYC:
        return
    kernel.require_pyc()
    kernel.wait_stderr(lambda lines: any("dropped" in ln.lower() for ln in lines), timeout=5, start=start)
    time.sleep(0.2)
    lines = dropped_lines(kernel, start)
    assert len(lines) == 1, "expected one 'dropped' line on stderr, got %r" % lines
    line = lines[0]
    assert line.startswith("pyc-kernel: "), line
    assert any(w in line.lower() for w in REASONS[reason]), "reason %s not in %r" % (REASONS[reason], line)


def send_bad(kernel, raw, frames, reason):
    start = len(kernel.stderr_lines())
    raw.sock.send_multipart(frames)
    got = raw.recv_all(wait=1.0)
    assert got == [], "a dropped message got an answer"
    check_dropped_log(kernel, start, reason)
    assert_alive(kernel.kc)


def test_good_message_on_raw_socket(kernel, raw):
    msg, frames = raw.frames()
    raw.sock.send_multipart(frames)
    got = raw.recv_all(wait=10)
    assert raw.replies_to(got) == [msg["header"]["msg_id"]]
    # the raw header: ISO 8601 date with microseconds and a zone
    _, parts = raw.session.feed_identities(got[0])  # [signature, header, parent, metadata, content, ...]
    header = json.loads(parts[1])
    for key in ("msg_id", "session", "username", "date", "msg_type", "version"):
        assert key in header, header
    assert header["msg_type"] == "kernel_info_reply"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:?\d\d)$", header["date"]), header["date"]
    # the signature is over the four JSON frames
    assert parts[0] == raw.session.sign(parts[1:5])


def test_bad_signature(kernel, raw):
    msg, frames = raw.frames()
    frames[1] = b"0" * len(frames[1])
    send_bad(kernel, raw, frames, "bad_signature")


def test_bad_signature_on_control(kernel):
    r = Raw(kernel, "control")
    try:
        msg, frames = r.frames()
        frames[1] = b"f" * len(frames[1])
        send_bad(kernel, r, frames, "bad_signature")
    finally:
        r.close()


def test_empty_and_short_signature(kernel, raw):
    for sig in (b"", b"abc"):
        msg, frames = raw.frames()
        frames[1] = sig
        send_bad(kernel, raw, frames, "bad_signature")


def test_replayed_message(kernel, raw):
    msg, frames = raw.frames()
    raw.sock.send_multipart(frames)
    got = raw.recv_all(wait=10)
    assert raw.replies_to(got) == [msg["header"]["msg_id"]]
    # the exact same signed frames again: no second reply
    send_bad(kernel, raw, frames, "replay")


def test_too_few_frames(kernel, raw):
    msg, frames = raw.frames()
    send_bad(kernel, raw, frames[:3], "too_few_frames")


def test_no_delimiter(kernel, raw):
    msg, frames = raw.frames()
    send_bad(kernel, raw, frames[1:], "no_delimiter")


@ipykernel_falls_short
@pytest.mark.parametrize("content", [
    b"{not json",
    b'{"code": "print(\xff\xfe)", "silent": false}',           # invalid UTF-8 in the code
    b'{"code": "x = \'\\ud800\'", "silent": false}',            # a lone surrogate
    b'{"code": "1", "silent": false, "n": 9223372036854775808}',  # an integer of 2^63
], ids=["invalid-json", "invalid-utf8", "lone-surrogate", "integer-2-63"])
def test_signed_request_that_cannot_be_read_gets_an_error_reply(kernel, raw, content):
    """A signed request whose content cannot be parsed is answered (status error, ename BadRequest, with
    busy and idle), not dropped: its client would wait for ever."""
    h = raw.session.msg_header("execute_request")
    raw.sock.send_multipart(raw.signed(raw.session.pack(h), content=content))
    got = raw.recv_all(wait=10)
    assert len(got) == 1, "no reply, or more than one"
    _, parts = raw.session.feed_identities(got[0])
    reply = raw.session.deserialize(parts, content=True)
    assert reply["parent_header"]["msg_id"] == h["msg_id"]
    assert reply["msg_type"] == "execute_reply"
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "BadRequest"
    assert "could not be read" in reply["content"]["evalue"]
    assert reply["metadata"]["pyc"]["outcome"] == "bad_request"
    assert_alive(kernel.kc)


def test_invalid_json_header(kernel, raw):
    send_bad(kernel, raw, raw.signed(b'{"msg_id": "x", '), "invalid_json")


def test_header_without_msg_type(kernel, raw):
    h = raw.session.msg_header("kernel_info_request")
    del h["msg_type"]
    send_bad(kernel, raw, raw.signed(raw.session.pack(h)), "no_msg_type")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_huge_content(kernel, raw):
    """64 MB of content: pyc may answer it or drop it (with a log line); either way it lives on."""
    start = len(kernel.stderr_lines())
    msg, frames = raw.frames(content={"pad": "x" * (64 * 1024 * 1024)})
    raw.sock.send_multipart(frames)
    got = raw.recv_all(wait=30)
    if got:
        assert raw.replies_to(got) == [msg["header"]["msg_id"]]
    else:
        assert IS_PYC, "the reference kernel answers a 64 MB kernel_info_request"
        lines = kernel.wait_stderr(lambda lines: any("dropped" in ln.lower() for ln in lines), timeout=5, start=start)
        assert any("dropped" in ln.lower() for ln in lines), "huge message neither answered nor logged as dropped"
    assert_alive(kernel.kc, timeout=60)


def test_garbage_frames(kernel, raw):
    """A burst of assorted junk; the kernel neither answers nor dies."""
    junk = [
        [b""],
        [b"\x00\xff" * 100],
        [DELIM],
        [DELIM, b"", b"", b"", b"", b""],
        [DELIM, b"x" * 64, b"{}", b"{}", b"{}", b"{}"],
        [b"ident", DELIM, b"sig", b"[]", b"{}", b"{}", b"{}"],
    ]
    for frames in junk:
        raw.sock.send_multipart(frames)
    assert raw.recv_all(wait=1.0) == []
    assert_alive(kernel.kc)
