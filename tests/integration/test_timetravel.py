"""Time travel (README, "Time travel"; issue 15): snapshots of a live kernel as parked copy-on-write forks,
restores that keep the kernel Jupyter started (its pid, ports and key), transactional cells, automatic
snapshots under their bounds, the magics, and what a restore keeps true (history, checkpoint replay).

Everything goes through jupyter_client: the comm target pyc.snapshot by way of pyc_client, and the original
KernelManager for interrupt, restart and shutdown after a restore.  Every process a test sees (snapshots,
restored kernels) is registered, so that the session's leak check finds any that outlives its kernel.
"""

import json
import os
import signal
import sys
import threading
import time

import pytest

import pyctest
from pyctest import (IS_PYC, NOT_PYC_REASON, TIMEOUT, UNDER_ASAN, Kernel, connect_client, eval_value, execute,
                     pid_alive, register_pid, stream_text)

pytestmark = pytest.mark.skipif(not IS_PYC, reason=NOT_PYC_REASON)

sys.path.insert(0, os.path.join(pyctest.PYC_SRCDIR, "cli", "python"))
import pyc_client  # noqa: E402


def snap(kc, name=None):
    record = pyc_client.snapshot(kc, name)
    register_pid(record["pid"])
    return record


def restore(kc, name):
    answer = pyc_client.restore(kc, name, timeout=TIMEOUT)
    register_pid(answer["pid"])
    return answer


def listed(kc):
    snaps = pyc_client.snapshots(kc)
    for s in snaps:
        register_pid(s["pid"])
    return snaps


def ok(kc, code, **kw):
    reply, msgs = execute(kc, code, **kw)
    assert reply["content"]["status"] == "ok", reply["content"]
    return reply, msgs


def settle(kc):
    """After a restore the kernel made by itself (a rollback, %restore): as a frontend's event loop does, poll
    the client's iopub socket, which then subscribes again to the restored kernel (ZeroMQ reconnects it, and a
    SUB socket sends its subscription when its owner next touches it)."""
    pyctest.drain(kc, "iopub", quiet=0.3)


def wait_gone(pids, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if pid_alive(p)]


def test_undo_in_place_changes_del_module_state_and_unpicklable_objects(fresh_kernel):
    pytest.importorskip("pandas")
    kc = fresh_kernel.kc
    ok(kc, "import pandas as pd, decimal, threading\n"
           "df = pd.DataFrame({'a': [1, 2, 3]})\n"
           "keep = 'here'\n"
           "lock = threading.Lock()\n"
           "gen = (i for i in range(10))\n"
           "next(gen)\n"
           "decimal.getcontext().prec = 7")
    record = snap(kc, "before")
    assert record["name"] == "before" and record["execution_count"] == 1 and pid_alive(record["pid"])
    ok(kc, "df['a'] *= 10\ndf.drop(0, inplace=True)\ndel keep\nlock.acquire()\nnext(gen); next(gen)\n"
           "decimal.getcontext().prec = 3")
    assert eval_value(kc, "df['a'].tolist(), 'keep' in dir(), lock.locked()") == "([20, 30], False, True)"
    answer = restore(kc, "before")
    assert answer["restoring"] == "before"
    # the in-place change, the del, the lock (unpicklable), the generator's position, a module's state
    assert eval_value(kc, "df['a'].tolist(), keep, lock.locked(), next(gen), decimal.getcontext().prec") == \
        "([1, 2, 3], 'here', False, 1, 7)"


def test_a_restore_is_the_same_kernel_to_every_client(fresh_kernel):
    k, kc = fresh_kernel, fresh_kernel.kc
    with open(k.km.connection_file) as f:
        connection = f.read()
    other = connect_client(k.km.connection_file)
    try:
        ok(kc, "x = 1")
        snap(kc, "one")
        ok(kc, "x = 2")
        ok(kc, "y = 3")
        before = pyc_client.snapshots(kc)
        restore(kc, "one")
        # the process Jupyter started is still the kernel's pid, and alive; the connection is unchanged
        assert k.km.is_alive() and pid_alive(k.pid)
        with open(k.km.connection_file) as f:
            assert f.read() == connection
        # the execution count goes on, and In holds every cell, the undone ones too
        reply, msgs = ok(kc, "print(x, 'y' in dir(), len(In))")
        assert reply["content"]["execution_count"] == 4
        assert stream_text(msgs) == "1 False 5\n"
        assert eval_value(kc, "In[2], In[3]") == "('x = 2', 'y = 3')"
        # the other client never reconnected by hand: ZeroMQ did, and it runs cells as before.  (Its SUB
        # socket subscribes again when it is next polled, which a frontend's event loop does at once; a
        # blocking client polls it when it reads iopub.)
        pyctest.drain(other, "iopub", quiet=0.3)
        reply, msgs = ok(other, "print(x + 10)", timeout=TIMEOUT)
        assert stream_text(msgs) == "11\n"
        # the history has every cell, on the same session
        reply, _ = pyctest.request(kc, "history_request", {"hist_access_type": "range", "session": 0,
                                                           "start": 1, "stop": 10, "raw": True, "output": False})
        sources = [h[2] for h in reply["content"]["history"]]
        assert sources[:3] == ["x = 1", "x = 2", "y = 3"] and "print(x + 10)" in sources
        # the snapshot is still there (a parked copy of it), for another restore
        after = listed(kc)
        assert [s["name"] for s in after] == [s["name"] for s in before] == ["one"]
        ok(kc, "x = 5")
        restore(kc, "-1")
        assert eval_value(kc, "x") == "1"
        # usage_request counts them
        reply, _ = pyctest.request(kc, "usage_request", {}, channel="control")
        assert reply["content"]["pyc"]["snapshots"]["count"] == 1
        assert reply["content"]["pyc"]["snapshots"]["bytes"] > 0
    finally:
        other.stop_channels()


def test_requests_sent_during_a_restore_are_answered(fresh_kernel):
    """Requests that reach the kernel after the one that asks for a restore, before the hand-over, are
    answered by the restored kernel (the replaced one passes them on): none is lost."""
    import uuid

    kc = fresh_kernel.kc
    ok(kc, "x = 1")
    snap(kc, "s")
    ok(kc, "x = 2")
    comm = kc.session.msg("comm_open", {"comm_id": uuid.uuid4().hex, "target_name": "pyc.snapshot",
                                        "data": {"op": "restore", "name": "s"}})
    kc.shell_channel.send(comm)
    ids = [kc.execute("", silent=True, user_expressions={"v": "x"}) for _ in range(5)]
    replies = {}
    deadline = time.monotonic() + TIMEOUT
    while len(replies) < len(ids) and time.monotonic() < deadline:
        try:
            m = kc.get_shell_msg(timeout=0.2)
        except Exception:
            settle(kc)
            continue
        if m["parent_header"].get("msg_id") in ids:
            replies[m["parent_header"]["msg_id"]] = m
    assert len(replies) == len(ids), "%d of %d requests answered" % (len(replies), len(ids))
    values = [replies[i]["content"]["user_expressions"]["v"]["data"]["text/plain"] for i in ids]
    # each saw the state before the restore or after it, in that order
    assert values == sorted(values, reverse=True) and set(values) <= {"1", "2"}, values
    for s in listed(kc):
        register_pid(s["pid"])


def test_the_next_request_after_a_restore_is_never_lost(fresh_kernel):
    """A client that sends its next request as soon as it has the answer (reply and idle) to the one that
    asked for a restore, as nbclient does, 0 to 30 milliseconds later: every one is answered, by the restored
    kernel.  (The replaced kernel used to answer and close its sockets a few ms later; a request
    written to the old connection in between was lost, and nbclient waited for its reply until its timeout:
    examples/timetravel.ipynb under AddressSanitizer in CI.  On that build 2 of these 29 were lost in each of 3 runs.)"""
    kc = fresh_kernel.kc
    ok(kc, "n = 0")
    snap(kc, "zero")
    lost = []
    delays = [0, 1, 2] + [3 + 0.5 * j for j in range(24)] + [20, 30]
    for i, delay_ms in enumerate(delays):
        ok(kc, "n = %d" % (i + 1))
        msg_id = kc.execute("%restore zero")
        reply = pyctest.get_reply(kc, msg_id)
        assert reply["content"]["status"] == "ok", reply["content"]
        pyctest.iopub_for(kc, msg_id)
        time.sleep(delay_ms / 1000)
        next_id = kc.execute("n", silent=False)
        try:
            reply = pyctest.get_reply(kc, next_id, timeout=8)
        except pytest.fail.Exception:
            lost.append(delay_ms)
            continue
        assert reply["content"]["status"] == "ok", reply["content"]
        msgs = pyctest.iopub_for(kc, next_id)
        assert [m["content"]["data"]["text/plain"] for m in msgs if m["msg_type"] == "execute_result"] == ["0"]
    assert lost == [], "the request sent %s ms after the restore's answer was lost" % lost
    for s in listed(kc):
        register_pid(s["pid"])


def test_a_restore_that_fails_loses_nothing():
    """A snapshot that cannot take over (here: stopped, so it never answers READY; the kernel has closed its
    sockets by then and binds them again after PYC_RESTORE_TIMEOUT, 10 s by default and 2 s here) leaves the
    kernel as it was, serving: the answer to the request that asked for the restore still reaches the client
    (from the kernel itself, once the client is back), the state is the one before, and the list says why the
    restore failed."""
    with pyctest.Kernel("pyc", env={"PYC_RESTORE_TIMEOUT": "2"}) as k:
        restore_that_fails(k, k.kc)


def restore_that_fails(k, kc):
    ok(kc, "x = 1")
    record = snap(kc, "stuck")
    ok(kc, "x = 2")
    os.kill(record["pid"], signal.SIGSTOP)
    try:
        msg_id = kc.execute("%restore stuck")
        reply = pyctest.get_reply(kc, msg_id, timeout=TIMEOUT)
        assert reply["content"]["status"] == "ok", reply["content"]
        pyctest.iopub_for(kc, msg_id)
    finally:
        os.kill(record["pid"], signal.SIGCONT)
    assert k.km.is_alive()
    assert eval_value(kc, "x") == "2"
    answer = pyc_client.request(kc, {"op": "list"}, target="pyc.snapshot")[0]
    assert "did not take over" in answer.get("restore_error", ""), answer
    assert [s["name"] for s in answer["snapshots"]] == []


def test_interrupt_and_restart_after_a_restore_through_the_kernel_manager(fresh_kernel):
    k, kc = fresh_kernel, fresh_kernel.kc
    ok(kc, "x = 1")
    first = snap(kc, "a")
    restored = restore(kc, "a")["pid"]
    # interrupt by signal, as the kernel manager sends it (to the process group of the pid it started)
    msg_id = kc.execute("import time; time.sleep(60)")
    assert pyctest.wait_running(kc, msg_id)
    k.km.interrupt_kernel()
    reply = pyctest.get_reply(kc, msg_id, timeout=TIMEOUT)
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
    pyctest.iopub_for(kc, msg_id, check=False)      # wait_running took its first messages
    assert eval_value(kc, "x") == "1"
    snaps = [s["pid"] for s in listed(kc)]
    # a restart ends the restored kernel and every snapshot, and starts afresh on the same ports
    k.restart()
    assert wait_gone([restored, first["pid"]] + snaps) == []
    reply, _ = execute(k.kc, "x")
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "NameError"


@pytest.mark.parametrize("now", [False, True], ids=["shutdown", "kill"])
def test_shutdown_or_kill_after_a_restore_ends_everything(now):
    k = Kernel("pyc")
    try:
        ok(k.kc, "x = 1")
        snap(k.kc, "a")
        restored = restore(k.kc, "a")["pid"]
        snap(k.kc, "b")
        pids = [restored] + [s["pid"] for s in listed(k.kc)]
        assert all(pid_alive(p) for p in pids)
        k.km.shutdown_kernel(now=now)
        assert not k.km.is_alive()
        assert wait_gone(pids) == []
    finally:
        k.shutdown(now=True)


def _run_transaction(kc, code, metadata=None, interrupt_km=None):
    msg = kc.session.msg("execute_request", {"code": code, "silent": False, "store_history": True,
                                             "user_expressions": {}, "allow_stdin": False,
                                             "stop_on_error": True}, metadata=metadata or {})
    kc.shell_channel.send(msg)
    msg_id = msg["header"]["msg_id"]
    if interrupt_km is not None:
        assert pyctest.wait_running(kc, msg_id)
        interrupt_km.interrupt_kernel()
    reply = pyctest.get_reply(kc, msg_id, timeout=TIMEOUT)
    pyctest.iopub_for(kc, msg_id, check=interrupt_km is None)
    settle(kc)
    return reply


def test_transactional_cells_roll_back_on_error_timeout_and_interrupt(fresh_kernel):
    k, kc = fresh_kernel, fresh_kernel.kc
    ok(kc, "data = [1, 2, 3]\nstate = {'n': 0}")
    # on error (the magic line)
    r = _run_transaction(kc, "%%transaction\ndata.append(4)\nstate['n'] = 1\nraise ValueError('no')")
    assert r["content"]["status"] == "error" and r["metadata"]["pyc"]["transaction"] == "rolled_back"
    assert eval_value(kc, "data, state") == "([1, 2, 3], {'n': 0})"
    # on its time limit (metadata)
    r = _run_transaction(kc, "data.append(5)\nimport time\ntime.sleep(30)",
                         metadata={"pyc": {"transaction": True, "timeout": 1}})
    assert r["metadata"]["pyc"]["outcome"] == "timeout" and r["metadata"]["pyc"]["transaction"] == "rolled_back"
    assert eval_value(kc, "data") == "[1, 2, 3]"
    # on an interrupt by signal
    r = _run_transaction(kc, "%%transaction\ndata.clear()\nimport time\ntime.sleep(30)", interrupt_km=k.km)
    assert r["content"]["ename"] == "KeyboardInterrupt" and r["metadata"]["pyc"]["transaction"] == "rolled_back"
    assert eval_value(kc, "data") == "[1, 2, 3]"
    # one that succeeds stays, and leaves no snapshot behind
    r = _run_transaction(kc, "%%transaction\ndata.append(6)")
    assert r["content"]["status"] == "ok" and r["metadata"]["pyc"]["transaction"] == "committed"
    assert eval_value(kc, "data") == "[1, 2, 3, 6]"
    assert listed(kc) == []
    # the count went on through the rollbacks
    reply, _ = ok(kc, "pass")
    assert reply["content"]["execution_count"] == 6


def test_a_transaction_cannot_be_isolated(kc):
    r = _run_transaction(kc, "%%transaction\nx = 1", metadata={"pyc": {"isolate": "fork"}})
    assert r["content"]["status"] == "error" and "isolated or a transaction" in r["content"]["evalue"]
    assert listed(kc) == []
    # and an isolated cell takes no snapshot: they are the kernel's
    reply, msgs = execute(kc, "%%isolate\n%snapshot inside")
    assert reply["content"]["status"] == "error" and "main shell only" in reply["content"]["evalue"]
    assert listed(kc) == []


def test_automatic_snapshots_keep_the_newest_within_count_and_memory():
    k = Kernel("pyc", extra_arguments=["--snapshots=3", "--snapshot-memory=60M"])
    try:
        kc = k.kc
        for i in range(5):
            ok(kc, "v%d = %d" % (i, i))
        snaps = listed(kc)
        # before cells 3, 4, 5: the two oldest were dropped
        assert [s["name"] for s in snaps] == ["auto-before-3", "auto-before-4", "auto-before-5"]
        assert all(s["automatic"] for s in snaps)
        restore(kc, "auto-before-4")
        assert eval_value(kc, "'v2' in dir(), 'v3' in dir()") == "(True, False)"
        # cells that each rewrite 25 MB: the snapshots hold what was rewritten since each; within 60 MB
        ok(kc, "buf = bytearray(25 << 20)")
        for i in range(4):
            ok(kc, "buf[:] = bytes([%d]) * len(buf)" % (i + 1))
        # after each cell, the automatic snapshots hold at most the budget together (the oldest went)
        snaps = listed(kc)
        held = sum(s["bytes"] for s in snaps)
        assert 1 <= len(snaps) < 3 and held <= 60 << 20, snaps
    finally:
        k.shutdown(now=True)


def test_snapshots_taken_by_name_are_bounded():
    """At most PYC_MAX_SNAPSHOTS snapshots taken by name are held (each a parked process): one more is refused
    with why; a name taken again replaces its snapshot, and a dropped one makes room."""
    k = Kernel("pyc", env={"PYC_MAX_SNAPSHOTS": "2"})
    try:
        kc = k.kc
        snap(kc, "a")
        snap(kc, "b")
        reply, msgs = execute(kc, "%snapshot c")
        assert reply["content"]["status"] == "error", reply["content"]
        assert "2 snapshots taken by name" in reply["content"]["evalue"]
        assert "PYC_MAX_SNAPSHOTS" in reply["content"]["evalue"]
        settle(kc)
        snap(kc, "a")                            # the same name again: the newer state, no more held
        ok(kc, "%snapshot -d b")
        snap(kc, "c")
        assert sorted(s["name"] for s in listed(kc)) == ["a", "c"]
    finally:
        k.shutdown(now=True)


def test_magics(fresh_kernel):
    kc = fresh_kernel.kc
    ok(kc, "x = 'first'")
    reply, msgs = ok(kc, "%snapshot mark")
    assert "snapshot mark" in stream_text(msgs)
    ok(kc, "x = 'second'")
    reply, msgs = ok(kc, "%snapshots")
    assert stream_text(msgs).startswith("mark")
    reply, msgs = ok(kc, "%restore mark")
    assert "restoring mark" in stream_text(msgs)
    # the restore happens once that cell is answered; the next cell runs in the restored kernel
    settle(kc)
    assert eval_value(kc, "x") == "'first'"
    for s in listed(kc):
        register_pid(s["pid"])
    reply, msgs = execute(kc, "%restore nothere")
    assert reply["content"]["status"] == "error" and "no snapshot nothere" in reply["content"]["evalue"]
    reply, msgs = ok(kc, "%snapshot -d mark")
    reply, msgs = ok(kc, "%snapshots")
    assert "no snapshots" in stream_text(msgs)
    reply, msgs = execute(kc, "%snapshot a b")
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "UsageError"


def test_a_restore_is_recorded_so_that_replay_stays_true(fresh_kernel, tmp_path):
    kc = fresh_kernel.kc
    ok(kc, "log = ['a']")
    snap(kc, "s")
    ok(kc, "log.append('undone')")
    restore(kc, "s")
    ok(kc, "log.append('b')")
    reply, _ = pyctest.request(kc, "usage_request", {}, channel="control")
    checkpoint = reply["content"]["pyc"]["checkpoint"]
    assert checkpoint and "restore In[1]" in open(checkpoint).read()
    replayed = Kernel("pyc", env={"PYC_REPLAY": checkpoint, "PYC_CHECKPOINT": "0"})
    try:
        assert eval_value(replayed.kc, "log") == "['a', 'b']"
    finally:
        replayed.shutdown(now=True)


def test_what_a_snapshot_does_not_hold_is_said(fresh_kernel):
    kc = fresh_kernel.kc
    ok(kc, "import threading, time\nstop = threading.Event()\n"
           "t = threading.Thread(target=stop.wait, name='worker', daemon=True)\nt.start()")
    record = snap(kc, "t")
    assert any("thread" in s and "worker" in s for s in record["not_carried"]), record
    ok(kc, "stop.set(); t.join()")
    answer = restore(kc, "t")
    assert any("worker" in s for s in answer["not_carried"])
    # the thread is not in the restored kernel
    assert eval_value(kc, "[x.name for x in threading.enumerate() if x.name == 'worker']") == "[]"
    assert "restored t without" in fresh_kernel.stderr()


def test_a_forked_session_has_snapshots_of_its_own(fresh_kernel):
    kc = fresh_kernel.kc
    ok(kc, "x = 'parent'")
    snap(kc, "p")
    (child,) = pyc_client.fork(kc, 1)
    try:
        register_pid(child.pyc_child["pid"])
        child.wait_for_ready(timeout=TIMEOUT)
        assert listed(child) == []                 # the parent's are not its own
        ok(child, "x = 'child'")
        snap(child, "c")
        ok(child, "x = 'changed'")
        restore(child, "c")
        assert eval_value(child, "x") == "'child'"
        assert [s["name"] for s in listed(child)] == ["c"]
        assert pid_alive(child.pyc_child["pid"])   # its process stays, as the parent's does
    finally:
        child.stop_channels()
        pyctest.kill_pid(child.pyc_child["pid"])
    # the parent is untouched, and still restores its own
    assert eval_value(kc, "x") == "'parent'"
    ok(kc, "x = 'later'")
    restore(kc, "p")
    assert eval_value(kc, "x") == "'parent'"


def test_bad_requests_leave_the_kernel_as_it_was(kc):
    for data, why in (({"op": "restore", "name": "nope"}, "no snapshot nope"),
                      ({"op": "drop", "name": "nope"}, "no snapshot nope"),
                      ({"op": "fly"}, "unknown op"),
                      ({"op": "take", "name": "x" * 300}, "at most 200 bytes"),
                      ({"op": "restore", "name": "-3"}, "no snapshot -3")):
        with pytest.raises(pyc_client.PycError) as e:
            pyc_client.request(kc, data, target="pyc.snapshot")
        assert why in str(e.value)
    assert eval_value(kc, "1 + 1") == "2"


@pytest.mark.skipif(UNDER_ASAN, reason="AddressSanitizer reserves terabytes of address space up front")
def test_under_a_memory_cap_the_snapshots_own_pages_count():
    k = Kernel("pyc", extra_arguments=["--memory-limit=200M"])
    try:
        kc = k.kc
        # written in place (no temporary copy: the cap counts the kernel's own memory too)
        ok(kc, "import ctypes\nbuf = bytearray(120 << 20)\n"
               "fill = lambda c: ctypes.memset((ctypes.c_char * len(buf)).from_buffer(buf), c, len(buf))\n"
               "fill(97)")
        snap(kc, "one")
        ok(kc, "fill(98)")                       # the snapshot now holds its own 120 MB
        snap(kc, "two")
        ok(kc, "fill(99)")                       # and this one too: 240 MB of their own, past the cap
        ok(kc, "del buf; import gc; gc.collect()")
        with pytest.raises(pyc_client.PycError) as e:
            pyc_client.snapshot(kc, "three")
        assert "memory limit" in str(e.value)
        pyc_client.drop_snapshot(kc, "one")
        snap(kc, "three")
    finally:
        k.shutdown(now=True)
