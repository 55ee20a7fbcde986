"""The cell journal (journal_request on control): every cell that is not silent, by its execute_request's
msg_id, with its state, its outputs up to a cap and its reply, readable while another cell runs; `expect`
records cells a client sent and will not wait for (what `pyc fire` does).  README "Fire and poll" documents
the bounds; a kernel without the journal (ipykernel) does not answer journal_request at all.
"""

import time

import pytest

import pyctest
from pyctest import IS_PYC, TIMEOUT, execute, get_reply, iopub_for, send

pytestmark = pytest.mark.skipif(not IS_PYC, reason="journal_request is pyc's own")


@pytest.fixture
def fresh_kernel_factory():
    """Starts kernels of their own with extra environment; ends them after the test."""
    started = []

    def start(env):
        k = pyctest.Kernel("pyc", env=env)
        started.append(k)
        return k

    yield start
    for k in started:
        k.shutdown(now=True)


def journal(kc, timeout=TIMEOUT, **content):
    """The content of the journal_reply to a journal_request with content."""
    msg_id = send(kc, "journal_request", content, channel="control")
    reply = get_reply(kc, msg_id, channel="control", timeout=timeout)
    assert reply["msg_type"] == "journal_reply"
    return reply["content"]


def cell(kc, msg_id, **kw):
    content = journal(kc, ids=[msg_id], **kw)
    assert content["status"] == "ok", content
    assert [c["id"] for c in content["cells"]] == [msg_id]
    return content["cells"][0]


def test_done_cell_has_outputs_and_reply(kc):
    reply, msgs = execute(kc, "print('hello'); import sys; print('oops', file=sys.stderr); 6 * 7")
    c = cell(kc, reply["parent_header"]["msg_id"])
    assert c["state"] == "done"
    assert c["execution_count"] == reply["content"]["execution_count"]
    assert c["started"] <= c["ended"]
    types = [(o["type"], o["content"].get("name")) for o in c["outputs"]]
    assert types == [("stream", "stdout"), ("stream", "stderr"), ("execute_result", None)]
    assert c["outputs"][0]["content"]["text"] == "hello\n"
    assert c["outputs"][2]["content"]["data"]["text/plain"] == "42"
    assert c["outputs_dropped"] == 0
    assert c["reply"]["content"]["status"] == "ok"
    assert c["reply"]["metadata"]["pyc"]["outcome"] == "ok"


def test_a_cell_named_many_times_is_reported_once(kc):
    """A few KB of request cannot make the kernel build a reply of gigabytes: before, each repetition of an id
    copied that cell's outputs (here 2000 x 500 KB, 1 GB)."""
    reply, _ = execute(kc, "print('x' * 500_000)")
    msg_id = reply["parent_header"]["msg_id"]
    content = journal(kc, ids=[msg_id] * 2000 + ["nope"] * 3)
    assert [c["id"] for c in content["cells"]] == [msg_id, "nope", "nope", "nope"]
    assert content["cells"][0]["outputs"][0]["content"]["text"] == "x" * 500_000 + "\n"


def test_error_cell(kc):
    reply, _ = execute(kc, "1/0")
    c = cell(kc, reply["parent_header"]["msg_id"])
    assert c["state"] == "done"
    assert [o["type"] for o in c["outputs"]] == ["error"]
    assert c["outputs"][0]["content"]["ename"] == "ZeroDivisionError"
    assert c["reply"]["content"]["status"] == "error"


def test_running_cell_is_readable_while_it_runs(kc):
    msg_id = kc.execute("import time; print('started', flush=True); time.sleep(30)")
    deadline = time.monotonic() + TIMEOUT
    while True:
        c = cell(kc, msg_id)
        if c["state"] == "running" and c["outputs"]:
            break
        assert time.monotonic() < deadline, c
        time.sleep(0.05)
    assert c["outputs"][0]["content"]["text"] == "started\n"
    assert "reply" not in c and "ended" not in c
    send(kc, "interrupt_request", channel="control")
    reply = get_reply(kc, msg_id)
    iopub_for(kc, msg_id)
    c = cell(kc, msg_id)
    assert c["state"] == "done"
    assert c["reply"]["content"]["ename"] == "KeyboardInterrupt"


def test_expected_cell_is_queued_until_it_runs(kc):
    first = kc.execute("import time; time.sleep(1)")
    second = kc.session.msg("execute_request", {"code": "print('second')", "silent": False})
    c = cell(kc, second["header"]["msg_id"])
    assert c["state"] == "unknown"
    content = journal(kc, expect=[second["header"]["msg_id"]])
    assert content["cells"][0]["state"] == "queued"
    assert content["cells"][0]["queued"] > 0
    kc.shell_channel.send(second)
    get_reply(kc, first)
    get_reply(kc, second["header"]["msg_id"])
    iopub_for(kc, second["header"]["msg_id"])
    c = cell(kc, second["header"]["msg_id"])
    assert c["state"] == "done"
    assert c["outputs"][0]["content"]["text"] == "second\n"


def test_expected_cell_that_is_aborted(kc):
    """A cell waiting behind one that fails is aborted (stop_on_error): its record says so."""
    first = kc.execute("import time; time.sleep(2); 1/0")
    second = kc.session.msg("execute_request", {"code": "print('never')", "silent": False})
    journal(kc, expect=[second["header"]["msg_id"]])
    kc.shell_channel.send(second)
    get_reply(kc, first)
    reply = get_reply(kc, second["header"]["msg_id"])
    assert reply["content"]["status"] == "aborted"
    c = cell(kc, second["header"]["msg_id"])
    assert c["state"] == "done"
    assert c["reply"]["content"]["status"] == "aborted"
    assert c["outputs"] == []


def test_silent_cells_are_not_journaled(kc):
    msg_id = kc.execute("x_silent = 1", silent=True)
    get_reply(kc, msg_id)
    assert cell(kc, msg_id)["state"] == "unknown"


def test_listing_without_ids(kc):
    reply, _ = execute(kc, "print('listed')")
    content = journal(kc)
    ids = [c["id"] for c in content["cells"]]
    assert reply["parent_header"]["msg_id"] in ids
    last = [c for c in content["cells"] if c["id"] == reply["parent_header"]["msg_id"]][0]
    assert "outputs" not in last and last["status"] == "ok"
    assert content["limits"]["cells"] == 256


def test_isolated_cell_outputs_are_journaled(kc):
    msg_id = send(kc, "execute_request", {"code": "print('from the child')", "silent": False},
                  metadata={"pyc": {"isolate": "fork"}})
    assert get_reply(kc, msg_id)["content"]["status"] == "ok"
    iopub_for(kc, msg_id)
    c = cell(kc, msg_id)
    assert c["state"] == "done"
    assert [o["content"].get("text") for o in c["outputs"] if o["type"] == "stream"] == ["from the child\n"]


def test_what_a_thread_prints_after_its_cell_is_kept_and_handed_out_once(fresh_kernel_factory):
    """A thread that prints after its cell ended: the output is the cell's (the notebook shows it under the
    cell), the journal keeps it with the cell, the next reply says how many such outputs nobody fetched, and
    {"late": true} hands them out once."""
    k = fresh_kernel_factory({})
    kc = k.kc
    reply, _ = execute(kc, "import threading, time\ngo = threading.Event()\n"
                           "def f():\n    go.wait(); print('late one'); print('late two')\n"
                           "threading.Thread(target=f).start()")
    first = reply["parent_header"]["msg_id"]
    assert journal(kc, late=True)["cells"] == []
    reply, _ = execute(kc, "go.set(); time.sleep(0.5)")
    assert reply["metadata"]["pyc"].get("late_outputs") == 2, reply["metadata"]["pyc"]
    texts = [o["content"]["text"] for o in cell(kc, first)["outputs"]]
    assert "".join(texts) == "late one\nlate two\n"
    late = journal(kc, late=True)["cells"]
    assert [c["id"] for c in late] == [first] and late[0]["execution_count"] == 1
    assert "".join(o["content"]["text"] for o in late[0]["late"]) == "late one\nlate two\n"
    assert journal(kc, late=True)["cells"] == []                  # once
    reply, _ = execute(kc, "1")
    assert "late_outputs" not in reply["metadata"]["pyc"]


def test_bad_request(kc):
    content = journal(kc, ids="not a list")
    assert content["status"] == "error" and content["ename"] == "BadRequest"
    content = journal(kc, expect=[1, 2])
    assert content["status"] == "error"
    content = journal(kc, late="yes")
    assert content["status"] == "error" and "late" in content["evalue"]


def test_bounds(fresh_kernel_factory):
    """Past the cell cap outputs are counted, not kept; past the record cap the oldest done cell goes."""
    k = fresh_kernel_factory(env={"PYC_JOURNAL_CELLS": "3", "PYC_JOURNAL_CELL_BYTES": "2000"})
    kc = k.kc
    reply, _ = execute(kc, "for i in range(50): print('x' * 100, flush=True)")
    big = reply["parent_header"]["msg_id"]
    c = cell(kc, big)
    assert 0 < len(c["outputs"]) < 50
    assert c["outputs_dropped"] == 50 - len(c["outputs"])
    ids = [execute(kc, "%d" % i)[0]["parent_header"]["msg_id"] for i in range(3)]
    content = journal(kc)
    assert [c["id"] for c in content["cells"]] == ids
    assert cell(kc, big)["state"] == "unknown"


def test_off(fresh_kernel_factory):
    k = fresh_kernel_factory(env={"PYC_JOURNAL_CELLS": "0"})
    reply, _ = execute(k.kc, "1")
    content = journal(k.kc, ids=[reply["parent_header"]["msg_id"]])
    assert content["cells"] == [{"id": reply["parent_header"]["msg_id"], "state": "unknown"}]
    assert content["limits"]["cells"] == 0
