"""Warm pods for agents (issue 16): one pyc kernel per pod, started by a gateway and warmed once, forked into a
session per task with pyc_client.fork (comm target pyc.fork), as README's "Running on a cluster" describes.

The parent here is started the way a gateway starts it in a pod: `pyc-kernel gateway-launch` without --ip,
so the kernel binds 0.0.0.0, and the fake gateway takes its payload.  The tests check what an agent runtime
counts on:
  - each task's session starts from the warmed state (modules imported, variables set) and is isolated: a
    task's changes are seen neither by the parent nor by the tasks after it or beside it;
  - a child of a parent listening on 0.0.0.0 is reached at the address the client reaches the parent at
    (pyc_client.fork replaces the wildcard, as a gateway replaces the ip of its payload);
  - one request forks several sessions at once (fan-out), each a full kernel;
  - children are not gateway kernels: the gateway knows only the parent, and when it shuts the parent down
    (control shutdown_request, then {"shutdown": 1} on the comm port), the children end with it, so a pod
    is never kept alive by sessions nobody can reach.
The per-task start time (fork request to the child's first reply) is printed, not asserted: it is measured in
bench/bench_warm_pod.py, beside a new kernel through the launcher and ipykernel through it.
"""

import time
import uuid

import pyc_client
import pyctest
from fakegateway import gateway_shutdown, receive, run_one_plus_one, wait_gone

LOOPBACK = "127.0.0.1"

WARM = """
import json, decimal, fractions, statistics
shared = {"warmed": True}
solved = []
"""


def start_parent(gateway, launch, connect):
    """A pyc kernel started as a gateway starts it in a pod (bound to 0.0.0.0), warmed: (launcher, info,
    client)."""
    kid = str(uuid.uuid4())
    launcher = launch(["--kernel-id", kid, "--response-address", gateway.response_address,
                       "--public-key", gateway.public_key])
    info = receive(gateway, launcher, kid, ip="0.0.0.0")
    kc = connect(info, LOOPBACK)
    reply, _ = pyctest.execute(kc, WARM)
    assert reply["content"]["status"] == "ok", reply["content"]
    return launcher, info, kc


def adopt(children):
    """Registers the children's pids so that the run ends them whatever happens; returns the pids."""
    pids = []
    for kc in children:
        pid = kc.pyc_child["pid"]
        pyctest.register_pid(pid)
        pids.append(pid)
    return pids


def end_child(kc, pid):
    msg_id = pyctest.send(kc, "shutdown_request", {"restart": False}, channel="control")
    reply = pyctest.get_reply(kc, msg_id, channel="control", timeout=15)
    assert reply["content"]["status"] == "ok", reply["content"]
    kc.stop_channels()
    assert wait_gone(pid, 10), "the task's session %d did not end after its shutdown" % pid


def test_a_session_per_task_from_a_warm_parent(gateway, launch, connect):
    launcher, info, parent = start_parent(gateway, launch, connect)
    took = []
    for task in range(4):
        t0 = time.monotonic()
        [kc] = pyc_client.fork(parent, 1, timeout=30)
        [pid] = adopt([kc])
        assert kc.pyc_child["connection"]["ip"] == "0.0.0.0", kc.pyc_child["connection"]
        assert kc.ip == LOOPBACK, "the child's wildcard address was not replaced: %r" % kc.ip
        reply, msgs = pyctest.execute(
            kc, "solved.append(%d); shared['by'] = %d; (shared['warmed'], 'json' in dir(), len(solved))"
            % (task, task))
        took.append((time.monotonic() - t0) * 1000)
        assert reply["content"]["status"] == "ok", reply["content"]
        # Warmed state inherited; only this task's own append: the earlier tasks' sessions left nothing here.
        assert pyctest.result_text(msgs) == "(True, True, 1)", pyctest.summarize(msgs)
        assert pid != info["pid"] and pyctest.pid_alive(info["pid"])
        end_child(kc, pid)
    # The parent saw none of it.
    assert pyctest.eval_value(parent, "(solved, shared)") == "([], {'warmed': True})"
    run_one_plus_one(parent)
    print("per-task start (fork request to the child's first reply), ms: %s" % ", ".join("%.1f" % t for t in took))


def test_fan_out_and_children_end_with_the_gateway_kernel(gateway, launch, connect):
    launcher, info, parent = start_parent(gateway, launch, connect)
    kids = pyc_client.fork(parent, 3, timeout=30)
    pids = adopt(kids)
    assert len(set(pids)) == 3 and info["pid"] not in pids
    ports = [tuple(kc.pyc_child["connection"][k] for k in ("shell_port", "iopub_port", "hb_port")) for kc in kids]
    assert len(set(ports)) == 3, "the children share ports: %r" % ports
    # Each a full kernel with the parent's state, isolated from its siblings (sent to all before any reply).
    ids = [kc.execute("solved.append(%d); len(solved), solved[-1]" % i) for i, kc in enumerate(kids)]
    for i, (kc, msg_id) in enumerate(zip(kids, ids)):
        reply = pyctest.get_reply(kc, msg_id)
        assert reply["content"]["status"] == "ok", reply["content"]
        msgs = pyctest.iopub_for(kc, msg_id)
        assert pyctest.result_text(msgs) == "(1, %d)" % i, pyctest.summarize(msgs)

    # The gateway shuts its kernel down; the children, which it never knew, go with it.
    gateway_shutdown(parent, launcher, info, LOOPBACK)
    for kc in kids:
        kc.stop_channels()
    left = [pid for pid in pids if not wait_gone(pid, 10)]
    assert not left, "task sessions outlived the gateway's kernel: %r" % left
