"""Fork-isolated cells (issue 4): a cell run in a forked child streams its output as usual, merges back
the names it bound that pickle, reports the ones it could not, and an interrupt or timeout kills only the
child, leaving the kernel's state untouched."""

import os
import sys
import threading
import time

import pytest

from pyctest import IS_PYC, NOT_PYC_REASON, PYC_SRCDIR, eval_value, execute, get_reply, iopub_for, send

pytestmark = pytest.mark.skipif(not IS_PYC, reason=NOT_PYC_REASON)

sys.path.insert(0, os.path.join(PYC_SRCDIR, "cli", "python"))
import pyc_client  # noqa: E402


def kinds(outputs):
    return [m["msg_type"] for m in outputs]


def test_merge_back_of_new_and_changed_names(kc):
    execute(kc, "iso_a = 1\niso_b = [1, 2]\niso_keep = 'untouched'")
    reply, outs = pyc_client.run_isolated(kc, "iso_a = 2\niso_new = {'k': 'v'}\nprint('in the child')\niso_a + 40",
                                          timeout=30)
    assert reply["content"]["status"] == "ok"
    md = reply["metadata"]["pyc"]
    assert md["outcome"] == "ok" and md["state"] == "intact"
    assert sorted(md["merged"]) == ["iso_a", "iso_new"]
    assert kinds(outs) == ["stream", "execute_result"]
    assert outs[0]["content"]["text"] == "in the child\n"
    assert outs[1]["content"]["data"]["text/plain"] == "42"
    assert eval_value(kc, "iso_a, iso_new, iso_b, iso_keep") == "(2, {'k': 'v'}, [1, 2], 'untouched')"


def test_unpicklable_names_are_skipped_with_reasons(kc):
    reply, outs = pyc_client.run_isolated(kc, "iso_fn = lambda: 1\nimport json as iso_mod\niso_gen = (i for i in [1])\n"
                                              "iso_ok = 5", timeout=30)
    md = reply["metadata"]["pyc"]
    assert md["merged"] == ["iso_ok"]
    assert set(md["skipped"]) == {"iso_fn", "iso_mod", "iso_gen"}
    assert all(md["skipped"].values())
    assert eval_value(kc, "iso_ok") == "5"
    assert eval_value(kc, "'iso_fn' in globals()") == "False"


def test_in_place_mutation_does_not_reach_the_parent(kc):
    execute(kc, "iso_list = [1]")
    pyc_client.run_isolated(kc, "iso_list.append(2)", timeout=30)
    assert eval_value(kc, "iso_list") == "[1]"


def test_timeout_kills_a_busy_loop(kc):
    execute(kc, "iso_state = 'before'")
    t = time.monotonic()
    reply, outs = pyc_client.run_isolated(kc, "iso_state = 'changed'\nwhile True:\n    pass", timeout=2)
    assert time.monotonic() - t < 10
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "CellTimeout"
    assert reply["metadata"]["pyc"]["outcome"] == "timeout"
    assert kinds(outs) == ["error"]
    assert eval_value(kc, "iso_state") == "'before'"


def test_interrupt_of_a_c_loop_returns_promptly(fresh_kernel):
    kc = fresh_kernel.kc
    execute(kc, "iso_state = 'before'")
    timer = threading.Timer(1.0, fresh_kernel.km.interrupt_kernel)
    timer.start()
    t = time.monotonic()
    reply, outs = pyc_client.run_isolated(kc, "iso_state = 'changed'\nsum(range(10**10))")
    took = time.monotonic() - t
    timer.join()
    assert took < 6, took
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert reply["metadata"]["pyc"]["outcome"] == "interrupted" and reply["metadata"]["pyc"]["interrupted"] is True
    assert eval_value(kc, "iso_state") == "'before'"
    assert eval_value(kc, "1 + 1") == "2"


def test_error_in_isolated_cell(kc):
    reply, outs = pyc_client.run_isolated(kc, "iso_err_before = 1\n1/0", timeout=30)
    assert reply["content"]["ename"] == "ZeroDivisionError"
    assert kinds(outs) == ["error"]
    tb = "\n".join(outs[0]["content"]["traceback"])
    assert "1/0" in tb
    assert reply["metadata"]["pyc"]["merged"] == ["iso_err_before"]


def test_isolate_line_from_a_notebook_cell(kc):
    reply, msgs = execute(kc, "%%isolate 5\niso_cell = 'from a plain cell'\nprint('isolated')")
    assert reply["content"]["status"] == "ok"
    assert reply["metadata"]["pyc"]["merged"] == ["iso_cell"]
    assert eval_value(kc, "iso_cell") == "'from a plain cell'"


def test_fork_handlers_that_print_do_not_hang_the_kernel(fresh_kernel):
    """os.register_at_fork handlers are Python code: they run outside the kernel's own locks, so one that
    prints (or blocks a while) neither deadlocks the fork nor holds up the control channel."""
    kc = fresh_kernel.kc
    execute(kc, "import os, time\n"
                "os.register_at_fork(before=lambda: print('before fork'), after_in_parent=lambda: print('parent'),\n"
                "                    after_in_child=lambda: time.sleep(0.1))")
    t = time.monotonic()
    reply, outs = pyc_client.run_isolated(kc, "iso_handlers = 1", timeout=30)
    assert reply["content"]["status"] == "ok"
    assert time.monotonic() - t < 20
    assert eval_value(kc, "iso_handlers") == "1"


def _run_with(kc, code, pyc_md):
    msg_id = send(kc, "execute_request", {"code": code, "silent": False, "store_history": True,
                                          "user_expressions": {}, "allow_stdin": False, "stop_on_error": False},
                  metadata={"pyc": pyc_md})
    reply = get_reply(kc, msg_id, timeout=30)
    return reply, iopub_for(kc, msg_id, timeout=30)


def test_isolate_misspelt_is_refused_not_run_unisolated(kc):
    """Only "fork" isolates; any other value of metadata.pyc.isolate ("Fork", true, 1, "yes") is refused with
    BadRequest, and the cell is not run at all (run unisolated, it would have changed the kernel's state)."""
    execute(kc, "iso_bad = 'before'")
    for value in ("Fork", True, 1, "yes", "", {"mode": "fork"}):
        reply, outs = _run_with(kc, "iso_bad = 'changed'", {"isolate": value})
        c, md = reply["content"], reply["metadata"]["pyc"]
        assert c["status"] == "error" and c["ename"] == "BadRequest", (value, c)
        assert '"fork"' in c["evalue"] and "isolate" in c["evalue"]
        assert md["outcome"] == "bad_request" and md["state"] == "intact" and md["kernel_ending"] is False
        assert [k for k in kinds(outs) if k != "status"] == []       # nothing ran: no output
        assert eval_value(kc, "iso_bad") == "'before'"
    # null is "not isolated", as when absent
    reply, _ = _run_with(kc, "iso_bad = 'unisolated'", {"isolate": None})
    assert reply["content"]["status"] == "ok" and "isolated" not in reply["metadata"]["pyc"]
    assert eval_value(kc, "iso_bad") == "'unisolated'"
    # a timeout that is not a number is refused the same way
    for value in (True, "5", [5]):
        reply, _ = _run_with(kc, "iso_bad = 'timed'", {"isolate": "fork", "timeout": value})
        assert reply["content"]["ename"] == "BadRequest" and "timeout" in reply["content"]["evalue"]
    assert eval_value(kc, "iso_bad") == "'unisolated'"
