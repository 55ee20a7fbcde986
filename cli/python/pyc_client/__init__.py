"""pyc_client: move Python objects into, out of and between pyc kernels, from jupyter_client.

    from jupyter_client.manager import start_new_kernel
    import pyc_client

    km, kc = start_new_kernel(kernel_name="pyc")
    pyc_client.put(kc, "df", df)              # df is now a variable of the kernel
    df2 = pyc_client.get(kc, "df")            # and back
    ns = pyc_client.get(kc)                   # every picklable user variable, as a dict
    pyc_client.put(kc, None, {"a": 1})        # merge a dict into the kernel's namespace
    pyc_client.copy(kc, "df", kc2)            # kernel to kernel; nothing is unpickled in between
    children = pyc_client.fork(kc, 3)         # three live copies of the kernel, each a client

`client` is a jupyter_client BlockingKernelClient with its channels started (start_new_kernel gives one,
so does KernelManager.client() after start_channels()).  Objects travel as pickles, protocol 5: the
out-of-band buffers of NumPy arrays and pandas frames are raw frames of the Jupyter message (no base64, no
copy when they are pickled or received, except that a put cuts a buffer over 256 MiB into frames that the
kernel joins), and their SHA-256 digests (one per 4 MiB chunk, hashed by
several threads at once) travel in the signed message content and are checked before anything is
unpickled, here and in the kernel.  copy() between two kernels on the same machine has the source kernel
send the pickle straight to the destination kernel over a local socket: nothing passes through this
process, and the destination still checks the digests, which reach it in a request signed by this client.
Errors of the kernel raise PycError (.ename, .evalue); no answer in time raises TimeoutError.  Classes must be importable where an object is
unpickled: an instance of a class defined in a notebook cell lives in the kernel's __main__ and loads only
where __main__ has the same class (another kernel that ran the same cell).

Wire format (the kernel side is pyc._pickle, the comm target "pyc.pickle", whose docstring has every
request): each operation opens one comm with a comm_open on the shell channel, whose `data` is the request
and whose buffers are the pickle for a put; the kernel answers on iopub with one comm_msg on that comm
(buffers: the pickle, for a get), then a comm_close.  iopub messages that are not part of the operation and
arrive while it waits are dropped.

Trust: unpickling runs code.  get() trusts the kernel as much as running its output would; put() is the
same trust boundary as executing code in the kernel.
"""

import os
import pickle
import secrets
import time
import uuid
import warnings

__all__ = ["get", "put", "copy", "fork", "run_isolated", "request", "PycError", "PycSkippedWarning", "TARGET", "PROTOCOL",
           "use_curve", "start_kernel", "write_curve_keys", "curve_info"]

# The digest rules and constants are shared with the kernel: _digest.py is the kernel's own file.
from ._digest import DEFAULT_CHUNK as CHUNK  # the chunk size this client asks for
from ._digest import PROTOCOL, TARGET
from ._digest import digests as _digests
from ._digest import mismatch as _mismatch
from ._digest import FRAME_MAX
from ._digest import split as _split

# CURVE-encrypted kernels from jupyter_client 7.x (see _curve.py).
from ._curve import _wait_iopub, curve_info, start_kernel, use_curve, write_curve_keys


class PycError(Exception):
    """An error answer of the kernel: .ename, .evalue (and .reply, the whole answer)."""

    def __init__(self, ename, evalue, reply=None):
        super().__init__("%s: %s" % (ename, evalue))
        self.ename = ename
        self.evalue = evalue
        self.reply = reply or {}


class PycSkippedWarning(UserWarning):
    """get() of a whole namespace left out names that could not be pickled."""


# ---- transport ----------------------------------------------------------------------------------------


def _sync(sock):
    """A blocking pyzmq socket on the same ZeroMQ socket as `sock` (the blocking client's channels hold
    zmq.asyncio sockets).  Frames are then received without a copy, and a send never waits on an event
    loop that nobody runs."""
    import zmq

    underlying = getattr(sock, "underlying", None)
    if underlying is None:
        raise TypeError("pyc_client needs a jupyter_client BlockingKernelClient with started channels")
    return zmq.Socket.shadow(underlying)


def _left(deadline, what):
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("no answer from the kernel to %s in time" % what)
    return left


def _recv_iopub(client, sock, deadline, what):
    if not sock.poll(int(_left(deadline, what) * 1000) + 1):
        _left(deadline, what)
        return None
    frames = sock.recv_multipart(copy=False)
    session = client.session
    _, msg_list = session.feed_identities(frames, copy=False)
    return session.deserialize(msg_list, content=True, copy=False)


def request(client, data, buffers=(), timeout=60, target=None, settle=True):
    """Sends one pyc.pickle request (the comm_open's data, with buffers) and waits for the kernel's answer.
    A put's buffer larger than _frame_max() is sent as several frames (views, not copies; "frames" in the
    request says how many each took): a kernel takes no larger frame from a peer before it has checked the
    key (README, "Security model").

    Returns (answer data, answer buffers as memoryviews).  Raises PycError for an error answer or when the
    kernel closes the comm without an answer (no pyc.pickle target: not a pyc kernel), TimeoutError when
    nothing comes within timeout seconds.  With settle (the default) the request's idle is taken off the
    channel too, within a second after the answer."""
    target = target or TARGET
    deadline = time.monotonic() + timeout
    what = "%s %s" % (target, data.get("op", ""))
    session = client.session
    shell = _sync(client.shell_channel.socket)
    iopub = _sync(client.iopub_channel.socket)
    comm_id = uuid.uuid4().hex
    msg = session.msg("comm_open", {"comm_id": comm_id, "target_name": target, "data": data})
    msg_id = msg["header"]["msg_id"]
    if buffers and data.get("op") == "put" and "frames" not in data:
        buffers, counts = _split(buffers, _frame_max())
        if counts is not None:
            msg["content"]["data"] = dict(data, frames=counts)
    session.send(shell, msg, buffers=list(buffers))
    stderr = []
    answer = None
    while answer is None:
        m = _recv_iopub(client, iopub, deadline, what)
        if m is None:
            continue
        mt = m["header"]["msg_type"]
        content = m.get("content") or {}
        parent = (m.get("parent_header") or {}).get("msg_id")
        if mt == "comm_msg" and content.get("comm_id") == comm_id:
            answer = m
        elif (mt == "comm_close" and content.get("comm_id") == comm_id) or (
            mt == "status" and parent == msg_id and content.get("execution_state") == "idle"
        ):
            detail = "".join(stderr).strip()
            raise PycError("NoTarget", "the kernel closed the comm without an answer: it has no %r comm target "
                           "(is it a pyc kernel?)%s" % (target, ("\n" + detail) if detail else ""))
        elif mt == "stream" and parent == msg_id:
            stderr.append(content.get("text", ""))
    # the comm_close and the idle status follow at once: take them off the channel (briefly); not after a
    # restore, whose idle comes from the restored kernel once this client is back (settle=False)
    until = min(deadline, time.monotonic() + 1.0) if settle else time.monotonic()
    try:
        while settle:
            m = _recv_iopub(client, iopub, until, what)
            if m is None:
                continue
            if (m["header"]["msg_type"] == "status" and (m.get("parent_header") or {}).get("msg_id") == msg_id
                    and m["content"].get("execution_state") == "idle"):
                break
    except TimeoutError:
        pass
    reply = answer["content"].get("data") or {}
    if reply.get("status") != "ok":
        raise PycError(reply.get("ename", "Error"), reply.get("evalue", "the kernel answered %r" % (reply,)), reply)
    return reply, list(answer.get("buffers") or [])


# ---- pickles ------------------------------------------------------------------------------------------


def _flat(pb):
    try:
        return pb.raw()
    except BufferError:
        return memoryview(memoryview(pb).tobytes())


def _dumps(obj):
    oob = []
    main = pickle.dumps(obj, protocol=PROTOCOL, buffer_callback=lambda pb: oob.append(_flat(pb)))
    return [main] + oob


def _check(reply, buffers):
    """Checks the buffers of an answer against its digests: one per buffer, or lists of chunk digests."""
    digests = reply.get("sha256")
    if not isinstance(digests, list) or len(digests) != len(buffers):
        raise PycError("IntegrityError", "the answer has %d buffers and %s digests" %
                       (len(buffers), len(digests) if isinstance(digests, list) else "no"), reply)
    chunk = reply.get("chunk")
    if any(isinstance(d, list) for d in digests) and (not isinstance(chunk, int) or chunk <= 0):
        raise PycError("IntegrityError", "the answer has chunk digests without a chunk size", reply)
    why = _mismatch(buffers, digests, chunk)
    if why is not None:
        raise PycError("IntegrityError", why + " (in the kernel's answer)", reply)


def _frame_max():
    """The largest frame a put sends: FRAME_MAX, or less when this process's PYC_MAX_MESSAGE_BYTES says the
    kernels take less (a kernel drops the connection of a peer that sends a larger frame, and the put would
    then wait for its timeout)."""
    try:
        return max(1 << 20, min(FRAME_MAX, int(os.environ.get("PYC_MAX_MESSAGE_BYTES") or FRAME_MAX)))
    except ValueError:
        return FRAME_MAX


def _names_request(op, name):
    if name is None:
        return {"op": op, "names": None}
    if isinstance(name, str):
        return {"op": op, "name": name}
    return {"op": op, "names": list(name)}


def _warn_skipped(reply, stacklevel=3):
    skipped = reply.get("skipped") or {}
    if skipped:
        warnings.warn("not transferred (cannot be pickled): " +
                      "; ".join("%s (%s)" % (k, v) for k, v in sorted(skipped.items())),
                      PycSkippedWarning, stacklevel=stacklevel)


def get(client, name=None, timeout=60):
    """The value of `name` in the kernel.  name=None: every picklable user variable, as a dict (names that
    cannot be pickled are left out with a PycSkippedWarning); a list of names: a dict of those.

    NumPy arrays come back writable, on the received frames without a copy."""
    data = _names_request("get", name)
    data["chunk"] = CHUNK
    reply, buffers = request(client, data, timeout=timeout)
    _check(reply, buffers)
    if not isinstance(name, str):
        _warn_skipped(reply)
    return pickle.loads(buffers[0], buffers=buffers[1:])


def put(client, name, obj, timeout=60):
    """Sets `name` in the kernel to a copy of obj.  name=None: obj is a dict whose items are merged into
    the kernel's namespace.  Returns the kernel's answer (a dict: name or names, type, nbytes)."""
    if name is None and not isinstance(obj, dict):
        raise TypeError("put(client, None, obj) merges a dict into the namespace; obj is a %s" % type(obj).__name__)
    if name is not None and not isinstance(name, str):
        raise TypeError("name must be a str or None")
    buffers = _dumps(obj)
    data = _names_request("put", name)
    data["chunk"] = CHUNK
    data["sha256"] = _digests(buffers, CHUNK)
    data["nbytes"] = sum(memoryview(b).nbytes for b in buffers)
    reply, _ = request(client, data, buffers, timeout=timeout)
    return reply


def copy(src_client, name, dst_client, new_name=None, timeout=60, direct=True):
    """Copies `name` from the kernel of src_client into the kernel of dst_client (as new_name if given).
    name=None copies every picklable user variable (a PycSkippedWarning lists the ones left out); a list
    copies those names.  Nothing is unpickled in this process.  When both kernels run on the same machine
    (and direct is true), the source kernel sends the pickle straight to the destination over a local socket;
    otherwise (or when that fails to connect) the pickle's frames come here and are forwarded as they
    came, without a copy.  timeout covers every step.  Returns the destination kernel's answer, with
    "skipped" from the source's and "path": "direct" or "relay"."""
    if new_name is not None and not isinstance(name, str):
        raise TypeError("new_name needs a single name to copy")
    deadline = time.monotonic() + timeout
    if isinstance(name, str):
        data = {"op": "put", "name": new_name or name}
    else:
        data = {"op": "put", "names": None}
    done = _copy_direct(src_client, name, dst_client, data, deadline) if direct else None
    if done is None:
        get = _names_request("get", name)
        get["chunk"] = CHUNK
        got, buffers = request(src_client, get, timeout=_time_left(deadline, "the get of pyc.pickle copy"))
        data["sha256"] = got.get("sha256")
        data["nbytes"] = got.get("nbytes")
        if "chunk" in got:
            data["chunk"] = got["chunk"]
        reply, _ = request(dst_client, data, buffers, timeout=_time_left(deadline, "the put of pyc.pickle copy"))
        reply["path"] = "relay"
    else:
        got, reply = done
    if not isinstance(name, str):
        _warn_skipped(got)
    if "skipped" in got:
        reply["skipped"] = got["skipped"]
    return reply


def _time_left(deadline, what):
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("no time left for %s" % what)
    return left


#: Answers of the source kernel that mean "no direct path": the pickle then comes through this process.
_NOT_DIRECT = ("NotLocal", "ConnectionError", "NotSupported")


def _copy_direct(src_client, name, dst_client, put, deadline):
    """copy() with the pickle going from kernel to kernel (ops listen, get with send_to, put with ticket;
    see pyc._pickle).  Returns (get answer, put answer), or None when the kernels cannot reach each other
    that way, in which case nothing was changed in either."""
    left = _time_left(deadline, "pyc.pickle copy")
    # The ticket is this client's secret: it travels only in signed requests, never in an answer (answers
    # go out on iopub, which other local users may read).  Each kernel checks the other's process (its
    # answer to whoami, and to listen) on the socket before a byte moves.
    ticket = secrets.token_hex(16)
    try:
        me, _ = request(src_client, {"op": "whoami"}, timeout=left)
        landing, _ = request(dst_client, {"op": "listen", "timeout": left, "ticket": ticket,
                                          "sender": {"pid": me.get("pid"), "uid": me.get("uid")}}, timeout=left)
    except PycError:
        return None                          # not this version of pyc, or it cannot listen: relay
    if landing.get("machine") != me.get("machine"):
        _cancel(dst_client, ticket, deadline)
        return None                          # two machines (or network namespaces): relay
    get = _names_request("get", name)
    get["chunk"] = CHUNK
    get["send_to"] = {"address": landing.get("address"), "ticket": ticket, "machine": landing.get("machine"),
                      "timeout": left, "pid": landing.get("pid"), "uid": landing.get("uid")}
    try:
        got, buffers = request(src_client, get, timeout=_time_left(deadline, "the get of pyc.pickle copy"))
    except BaseException as e:
        cancelled = _cancel(dst_client, ticket, deadline)
        error = (cancelled or {}).get("landing_error")
        if isinstance(e, PycError) and error and error[0] == "PickleTooLarge":
            raise PycError(error[0], error[1], e.reply) from None   # the destination's limit is the reason
        if isinstance(e, PycError) and e.ename in _NOT_DIRECT:
            return None
        raise
    put = dict(put, ticket=ticket, chunk=got.get("chunk"), sha256=got.get("sha256"), nbytes=got.get("nbytes"))
    if not got.get("sent"):                   # a source kernel that knows no send_to answered as a get
        _cancel(dst_client, ticket, deadline)
        del put["ticket"]
        if put["chunk"] is None:
            del put["chunk"]
        reply, _ = request(dst_client, put, buffers, timeout=_time_left(deadline, "the put of pyc.pickle copy"))
        reply["path"] = "relay"
        return got, reply
    reply, _ = request(dst_client, put, timeout=_time_left(deadline, "the put of pyc.pickle copy"))
    reply["path"] = "direct"
    return got, reply


def _cancel(client, ticket, deadline):
    """Gives up a transfer the destination waits for; best effort.  Returns its answer or None."""
    try:
        reply, _ = request(client, {"op": "cancel", "ticket": ticket},
                           timeout=max(1.0, min(10.0, deadline - time.monotonic())))
        return reply
    except (PycError, TimeoutError):
        return None


# ---- fork ---------------------------------------------------------------------------------------------


#: Addresses a kernel binds to listen on every interface: no client can connect to them from another host.
_WILDCARD_IPS = ("0.0.0.0", "::", "*", "")


def fork(client, n=1, outlive=False, timeout=60, ip=None):
    """Forks the kernel behind `client` into n children (comm target pyc.fork) and returns a started
    BlockingKernelClient for each, in order, once its iopub is subscribed.  Each child starts from the
    kernel's state after its last finished request and is a full kernel: `client.pyc_child` holds its pid,
    connection file and connection info, and `client.pyc_not_carried` the sentences naming what the child does
    not have of the parent (its other threads, open network connections, GPU contexts; [] when nothing).
    Children end with their parent unless outlive is true.

    A child listens where its parent does.  When that is every interface (a kernel in a pod or container,
    started by a gateway, binds 0.0.0.0), the children are reached at the address this client reaches the
    parent at (`client.ip`), as a gateway replaces the ip of the connection info it receives; `ip` names
    another address."""
    from jupyter_client import BlockingKernelClient

    reply, _ = request(client, {"n": n, "outlive": bool(outlive)}, timeout=timeout, target="pyc.fork")
    clients = []
    for child in reply.get("children", []):
        info = dict(child["connection"])
        if ip is not None:
            info["ip"] = ip
        elif info.get("transport", "tcp") == "tcp" and info.get("ip") in _WILDCARD_IPS:
            info["ip"] = client.ip
        kc = BlockingKernelClient()
        kc.load_connection_info(info)
        if curve_info(info) is not None:
            use_curve(kc, info)   # a CURVE kernel's child has a key pair of its own
        kc.start_channels()
        kc.pyc_child = child
        kc.pyc_not_carried = list(reply.get("not_carried", []))
        clients.append(kc)
    for kc in clients:
        _wait_iopub(kc, timeout)   # so that no output of the child's first cell is published before it
    return clients


def snapshot(client, name=None, timeout=60):
    """Takes a snapshot of the kernel's state after its last finished request (comm target pyc.snapshot): a
    parked copy-on-write fork that costs only the pages the kernel writes from then on.  Returns its record,
    {"name", "pid", "execution_count", "taken", "automatic"}; a name taken again replaces the older one."""
    data = {"op": "take"}
    if name is not None:
        data["name"] = str(name)
    reply, _ = request(client, data, timeout=timeout, target="pyc.snapshot")
    return reply["snapshot"]


def snapshots(client, timeout=60):
    """The kernel's snapshots, oldest first, each with "bytes": the memory it really holds (its own pages)."""
    reply, _ = request(client, {"op": "list"}, timeout=timeout, target="pyc.snapshot")
    return reply["snapshots"]


def drop_snapshot(client, name, timeout=60):
    """Ends the snapshot `name`."""
    request(client, {"op": "drop", "name": str(name)}, timeout=timeout, target="pyc.snapshot")


def restore(client, name, timeout=30, reconnect=True):
    """Makes the snapshot `name` (or "-N", the Nth newest) the kernel's state, and returns once the restored
    kernel answers on client's channels.  It is the same kernel to every client: same ports, key and kernel
    pid (jupyter_client's interrupt, restart and shutdown keep working); the execution count goes on.

    The kernel's sockets close and open again in the snapshot's process: other clients' ZeroMQ sockets
    reconnect by themselves (within about 0.2 s); with reconnect, this client's channels are made anew at
    once instead.  Returns {"restoring": name, "pid": the process that now runs the kernel}."""
    import zmq

    # The old process drops this client's connections when it lets go: new channels are made only then, so that
    # none reaches the old process in its last milliseconds (a request sent there would be lost).
    shell = _sync(client.shell_channel.socket)
    monitor = None
    if reconnect:
        addr = "inproc://pyc-restore-%s" % uuid.uuid4().hex
        shell.monitor(addr, zmq.EVENT_DISCONNECTED)
        monitor = zmq.Context.shadow(client.context.underlying).socket(zmq.PAIR)
        monitor.connect(addr)
    try:
        reply, _ = request(client, {"op": "restore", "name": str(name)}, timeout=timeout, target="pyc.snapshot",
                           settle=False)
        if monitor is not None and monitor.poll(int(timeout * 1000)):
            monitor.recv_multipart()
    finally:
        if monitor is not None:
            shell.disable_monitor()
            monitor.close(linger=0)
    pid = reply["pid"]
    if reconnect:
        client.stop_channels()
        # jupyter_client 8's stop_channels destroys the zmq context when the client made it itself (7.x leaves it
        # open): the new channels need a live one, of the same kind (zmq.asyncio's for an asynchronous client),
        # which the client then owns and destroys in turn.
        if client.context.closed:
            client.context = type(client.context)()
            if hasattr(client, "_created_context"):
                client._created_context = True
        # jupyter_client's channels cannot be started twice: new ones are made (the attributes its channel
        # properties fill on first use, in 7.x and 8.x)
        for attr in ("_shell_channel", "_iopub_channel", "_stdin_channel", "_hb_channel", "_control_channel"):
            if hasattr(client, attr):
                setattr(client, attr, None)
        client.start_channels()
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the restored kernel did not answer within %s s" % timeout)
        try:
            # short: a request that reached the old process just before it let go is lost, not answered
            answer, _ = request(client, {"op": "list"}, timeout=min(left, 0.25), target="pyc.snapshot")
        except TimeoutError:
            continue
        if answer.get("pid") == pid:
            return reply
        time.sleep(0.005)


def run_isolated(client, code, timeout=None, wait=None):
    """Runs code in a forked child of the kernel (execute_request metadata {"pyc": {"isolate": "fork"}}):
    its output streams as usual, the names it binds that pickle are merged back into the kernel, and an
    interrupt or the timeout (seconds) kills only the child.  Returns (execute_reply, outputs), where
    outputs are the iopub messages of the cell; the reply's metadata["pyc"] says what happened (outcome,
    merged, skipped).  wait: how long to wait for the reply (default: timeout + 30 s, or no limit)."""
    md = {"pyc": {"isolate": "fork"}}
    if timeout is not None:
        md["pyc"]["timeout"] = timeout
    content = {"code": code, "silent": False, "store_history": True, "user_expressions": {},
               "allow_stdin": False, "stop_on_error": True}
    msg = client.session.msg("execute_request", content, metadata=md)
    client.shell_channel.send(msg)
    msg_id = msg["header"]["msg_id"]
    deadline = None if wait is None and timeout is None else time.monotonic() + (wait or timeout + 30)

    def left():
        if deadline is None:
            return None
        t = deadline - time.monotonic()
        if t <= 0:
            raise TimeoutError("no reply to the isolated cell in time")
        return t

    while True:
        reply = client.get_shell_msg(timeout=left())
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    outputs = []
    while True:
        m = client.get_iopub_msg(timeout=left() or 30)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            break
        if m["msg_type"] not in ("status", "execute_input"):
            outputs.append(m)
    return reply, outputs
