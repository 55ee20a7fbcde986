"""kernel_info_request on shell and control (DESIGN.md section 3)."""

import datetime
import platform

import pytest

from pyctest import get_reply, iopub_for, pyc_only, request


def _check_info(c):
    assert c["status"] == "ok"
    major, minor = (int(x) for x in c["protocol_version"].split(".")[:2])
    assert major == 5 and minor >= 3, c["protocol_version"]
    assert isinstance(c["implementation"], str) and c["implementation"]
    assert isinstance(c["implementation_version"], str) and c["implementation_version"]
    li = c["language_info"]
    assert li["name"] == "python"
    # the kernel embeds the same interpreter as the one running the tests
    assert li["version"] == platform.python_version()
    assert li["mimetype"] == "text/x-python"
    assert li["file_extension"] == ".py"
    assert li["pygments_lexer"] == "ipython3"
    assert li["codemirror_mode"] == {"name": "ipython", "version": 3}
    assert li["nbconvert_exporter"] == "python"
    assert isinstance(c["banner"], str) and c["banner"].strip()
    links = c["help_links"]
    assert isinstance(links, list)
    for link in links:
        assert isinstance(link.get("text"), str) and isinstance(link.get("url"), str), link


@pytest.mark.parametrize("channel", ["shell", "control"])
def test_kernel_info(kc, channel):
    reply, msgs = request(kc, "kernel_info_request", {}, channel=channel)
    assert reply["msg_type"] == "kernel_info_reply"
    _check_info(reply["content"])
    # busy and idle with this request as parent, and nothing else
    assert [(m["msg_type"], m["content"]["execution_state"]) for m in msgs] == [
        ("status", "busy"),
        ("status", "idle"),
    ]


def test_kernel_info_same_on_shell_and_control(kc):
    shell, _ = request(kc, "kernel_info_request", {}, channel="shell")
    control, _ = request(kc, "kernel_info_request", {}, channel="control")
    # IPython 9's banner (ipykernel 7) ends with a "Tip:" drawn at random for each request
    for c in (shell["content"], control["content"]):
        c["banner"] = c["banner"].partition("\nTip: ")[0]
    assert shell["content"] == control["content"]


def test_reply_header(kc):
    msg_id = kc.kernel_info()
    reply = get_reply(kc, msg_id)
    msgs = iopub_for(kc, msg_id)
    for m in [reply] + msgs:
        h = m["header"]
        assert h["msg_id"] and h["msg_id"] != msg_id
        assert isinstance(h["session"], str) and h["session"]
        assert h["session"] != kc.session.session
        assert isinstance(h["username"], str)
        assert h["version"].startswith("5.")
        # jupyter_client parses the ISO 8601 date; a zone is required
        assert isinstance(h["date"], datetime.datetime) and h["date"].tzinfo is not None, h["date"]
        assert m["parent_header"]["msg_id"] == msg_id
        assert m["parent_header"]["session"] == kc.session.session
    # all messages of one kernel session share the session id
    assert len({m["header"]["session"] for m in [reply] + msgs}) == 1


@pyc_only
def test_implementation_is_pyc(kernel):
    info = kernel.kernel_info()
    assert info["implementation"] == "pyc"
