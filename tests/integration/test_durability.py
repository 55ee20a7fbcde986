"""What a crash keeps (issue 22): history rows are committed by a writer thread off the request path, the
checkpoint is written before each reply.  README ("What a crash can lose") promises: every successful cell
whose execute_reply was sent is in the checkpoint; every cell whose idle was published at least 100 ms (plus
the writer's commit time) before a SIGKILL is in the history; a history_request sees every earlier cell.  These tests kill the kernel with
SIGKILL right after a reply and read what is left, through sqlite3 and through a replay.
"""

import os
import signal
import sqlite3
import time

import pytest

from pyctest import IS_PYC, NOT_PYC_REASON, Kernel, eval_value, execute, get_reply, iopub_for, request, send

pytestmark = pytest.mark.skipif(not IS_PYC, reason=NOT_PYC_REASON)

EXECUTE = {"silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False,
           "stop_on_error": True}


@pytest.fixture
def kernels():
    started = []

    def start(**env):
        k = Kernel(env={key: str(v) for key, v in env.items()})
        started.append(k)
        return k

    yield start
    for k in started:
        k.shutdown(now=True)


def kill9(k):
    """SIGKILL, then wait for the process to be gone."""
    os.kill(k.pid, signal.SIGKILL)
    k.process.wait(timeout=10)


def session_rows(path):
    """{line: source} of the newest session in the history file at path."""
    db = sqlite3.connect(path)
    try:
        (session,) = db.execute("SELECT max(session) FROM sessions").fetchone()
        return dict(db.execute("SELECT line, source FROM history WHERE session = ?", (session,)).fetchall())
    finally:
        db.close()


def test_history_and_checkpoint_after_sigkill_right_after_a_reply(kernels, tmp_path):
    """Cells 1..19 with their idle, 300 ms (the writer's 100 ms batch and its commit, with room for a loaded
    machine), cell 20, SIGKILL the moment its reply arrives: the history holds 1..19 (and cell 20 or not,
    never a gap), the checkpoint all 20, and a replay of it rebuilds all 20."""
    hist, cdir = tmp_path / "history.sqlite", tmp_path / "ck"
    k = kernels(PYC_HISTORY_FILE=hist, PYC_CHECKPOINT_DIR=cdir)
    path = k.kernel_info()["pyc"]["checkpoint"]
    n = 20
    for i in range(1, n):
        reply, _ = execute(k.kc, "v%d = %d" % (i, i))
        assert reply["content"]["status"] == "ok"
    time.sleep(0.3)
    msg_id = send(k.kc, "execute_request", dict(EXECUTE, code="v%d = %d" % (n, n)))
    assert get_reply(k.kc, msg_id)["content"]["status"] == "ok"
    kill9(k)

    rows = session_rows(str(hist))
    assert sorted(rows) == list(range(1, len(rows) + 1)), rows      # a prefix: no gap, nothing torn
    assert len(rows) >= n - 1, "cells whose idle came 300 ms before the kill are lost: %r" % sorted(rows)
    assert all(rows[i] == "v%d = %d" % (i, i) for i in rows)
    text = open(path).read()
    assert text.count("# %% pyc ") == n                              # written before each reply

    k2 = kernels(PYC_REPLAY=path, PYC_HISTORY_FILE=hist, PYC_CHECKPOINT_DIR=cdir)
    replayed = k2.kernel_info()["pyc"]["replayed"]
    assert replayed["ran"] == n and replayed["error"] is None
    assert eval_value(k2.kc, "sum(globals()['v%d' % i] for i in range(1, 21))") == str(n * (n + 1) // 2)


def test_history_of_a_pipelined_burst_after_sigkill(kernels, tmp_path):
    """300 cells sent without waiting (the writer commits lazily within the burst), every reply and the last
    idle, 300 ms, SIGKILL: all 300 are in the history."""
    hist = tmp_path / "history.sqlite"
    k = kernels(PYC_HISTORY_FILE=hist, PYC_CHECKPOINT="0")
    ids = [send(k.kc, "execute_request", dict(EXECUTE, code="p = %d" % i)) for i in range(300)]
    for msg_id in ids:
        assert get_reply(k.kc, msg_id)["content"]["status"] == "ok"
    iopub_for(k.kc, ids[-1])
    time.sleep(0.3)
    kill9(k)
    rows = session_rows(str(hist))
    assert sorted(rows) == list(range(1, 301))
    assert rows[300] == "p = 299"


def test_history_request_right_after_a_cell_sees_it(kernels, tmp_path):
    """A history_request sent right behind an execute_request (not waiting for its reply or idle), and one sent
    the moment a reply arrives, both include that cell: the queue is committed before the answer."""
    k = kernels(PYC_HISTORY_FILE=tmp_path / "history.sqlite", PYC_CHECKPOINT="0")
    tail = {"hist_access_type": "tail", "n": 3, "output": False, "raw": True}
    for i in range(5):
        exec_id = send(k.kc, "execute_request", dict(EXECUTE, code="h = %d" % i))
        hist_id = send(k.kc, "history_request", tail)
        get_reply(k.kc, exec_id)
        reply = get_reply(k.kc, hist_id)
        assert reply["content"]["history"][-1][1:] == [i + 1, "h = %d" % i]
    exec_id = send(k.kc, "execute_request", dict(EXECUTE, code="h = 'last'"))
    get_reply(k.kc, exec_id)
    reply, _ = request(k.kc, "history_request", tail)
    assert reply["content"]["history"][-1][1:] == [6, "h = 'last'"]
