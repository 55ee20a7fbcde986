"""Comms: custom messages between the frontend and Python code in the kernel (messaging spec, "Custom
Messages").

The C side hands every comm_open, comm_msg and comm_close from the frontend to dispatch(), and answers
comm_info_request with comm_info().  Python code opens comms to the frontend with Comm(target_name) and
registers targets for frontend-opened comms with get_comm_manager().register_target(name, callback).  The
`comm` package (python3-comm, used by ipywidgets and others) is pointed at this implementation when it is
imported (see hook_comm_package), so libraries written for ipykernel work unchanged.

A comm_open for a target nobody registered is answered with comm_close at once, as the spec asks.  An
exception raised by a callback is printed to the cell's stderr and never reaches the kernel.

At most max_comms() comms are open at once (PYC_MAX_COMMS, default 65536: a widget with its layout and style is
three), so that neither a frontend that opens comms and never closes them nor a loop in a cell makes the
registry grow without a bound: one more opened in the kernel raises CommLimitError, and one more opened by the
frontend is answered with comm_close and a line on stderr.
"""

import os
import sys
import traceback
import uuid

import _pyc

__all__ = ["Comm", "CommManager", "CommLimitError", "get_comm_manager", "create_comm"]


class CommLimitError(RuntimeError):
    """As many comms as PYC_MAX_COMMS allows are open: close some before opening more."""


def max_comms():
    """The most comms open at once: PYC_MAX_COMMS, default 65536."""
    try:
        n = int(os.environ.get("PYC_MAX_COMMS", "65536"))
    except ValueError:
        n = 65536
    return n if n > 0 else 65536


def _message(msg_type, content, metadata=None, buffers=None):
    return {
        "header": {"msg_type": msg_type},
        "msg_type": msg_type,
        "content": content,
        "metadata": metadata or {},
        "buffers": buffers or [],
    }


def _report(what):
    print("pyc: comm %s raised:" % what, file=sys.stderr)
    traceback.print_exc(file=sys.stderr)


class Comm:
    """One end of a comm.  primary=True (the default) opens it towards the frontend at once."""

    def __init__(self, target_name="", data=None, metadata=None, buffers=None, comm_id=None, primary=True,
                 target_module=None, topic=None, **kwargs):
        self.comm_id = comm_id or uuid.uuid4().hex
        self.target_name = target_name
        self.target_module = target_module
        self.primary = primary
        self._msg_callback = None
        self._close_callback = None
        self._closed = True
        if primary:
            self.open(data=data, metadata=metadata, buffers=buffers)
        else:
            self._closed = False

    def open(self, data=None, metadata=None, buffers=None):
        get_comm_manager().register_comm(self)
        _pyc.publish("comm_open", {"comm_id": self.comm_id, "target_name": self.target_name,
                                   "target_module": self.target_module, "data": data or {}},
                     metadata, buffers)
        self._closed = False

    @property
    def kernel(self):
        """The kernel, as ipykernel's Comm has it (ipywidgets 6 sends only while it is not None)."""
        from pyc import _shell

        return _shell.kernel()

    def send(self, data=None, metadata=None, buffers=None):
        if self._closed:
            raise ValueError("comm %s is closed" % self.comm_id)
        _pyc.publish("comm_msg", {"comm_id": self.comm_id, "data": data or {}}, metadata, buffers)

    def close(self, data=None, metadata=None, buffers=None, deleting=False):
        if self._closed:
            return
        self._closed = True
        _pyc.publish("comm_close", {"comm_id": self.comm_id, "data": data or {}}, metadata, buffers)
        get_comm_manager().unregister_comm(self)

    def on_msg(self, callback):
        """callback(msg) runs for every comm_msg from the frontend."""
        self._msg_callback = callback

    def on_close(self, callback):
        """callback(msg) runs when the frontend closes the comm."""
        self._close_callback = callback

    def handle_msg(self, msg):
        if self._msg_callback is not None:
            self._msg_callback(msg)

    def handle_close(self, msg):
        if self._close_callback is not None:
            self._close_callback(msg)

    def __repr__(self):
        return "<Comm %s target=%r%s>" % (self.comm_id, self.target_name, " closed" if self._closed else "")


class CommManager:
    """The registry of open comms and of targets for comms opened by the frontend."""

    def __init__(self):
        self.comms = {}
        self.targets = {}

    def register_target(self, target_name, f):
        """f(comm, open_msg) runs when the frontend opens a comm to target_name.  f may be 'module.name'."""
        if isinstance(f, str):
            module, _, name = f.rpartition(".")
            f = getattr(__import__(module, fromlist=[name]), name)
        self.targets[target_name] = f

    def unregister_target(self, target_name, f=None):
        return self.targets.pop(target_name, None)

    def register_comm(self, comm):
        """Keeps comm; raises CommLimitError when max_comms() others are open."""
        if comm.comm_id not in self.comms and len(self.comms) >= max_comms():
            raise CommLimitError("%d comms are open at once, the most this kernel keeps (PYC_MAX_COMMS); close "
                                 "some (comm.close()) before opening more" % len(self.comms))
        self.comms[comm.comm_id] = comm
        return comm.comm_id

    def unregister_comm(self, comm):
        self.comms.pop(comm.comm_id, None)

    def get_comm(self, comm_id):
        return self.comms.get(comm_id)


_manager = None


def get_comm_manager():
    global _manager
    if _manager is None:
        _manager = CommManager()
    return _manager


def create_comm(*args, **kwargs):
    return Comm(*args, **kwargs)


def dispatch(msg_type, content, metadata, buffers):
    """Handles a comm message from the frontend (called by the kernel, never raises)."""
    manager = get_comm_manager()
    msg = _message(msg_type, content, metadata, buffers)
    comm_id = content.get("comm_id")
    if msg_type == "comm_open":
        target = content.get("target_name", "")
        f = manager.targets.get(target)
        if f is None and target == "pyc.pickle":
            from pyc import _pickle

            manager.register_target("pyc.pickle", _pickle.target)
            f = _pickle.target
        if f is None:
            _pyc.publish("comm_close", {"comm_id": comm_id, "data": {}})
            print("pyc: no comm target %r is registered; comm %s closed" % (target, comm_id), file=sys.stderr)
            return
        comm = Comm(comm_id=comm_id, target_name=target, primary=False)
        try:
            manager.register_comm(comm)
        except CommLimitError as e:
            _pyc.publish("comm_close", {"comm_id": comm_id, "data": {}})
            print("pyc: comm %s to %r closed: %s" % (comm_id, target, e), file=sys.stderr)
            return
        try:
            f(comm, msg)
        except Exception:
            _report("target %r" % target)
            comm.close()
    elif msg_type == "comm_msg":
        comm = manager.get_comm(comm_id)
        if comm is None:
            return
        try:
            comm.handle_msg(msg)
        except Exception:
            _report("message handler")
    elif msg_type == "comm_close":
        comm = manager.comms.pop(comm_id, None)
        if comm is None:
            return
        comm._closed = True
        try:
            comm.handle_close(msg)
        except Exception:
            _report("close handler")


def comm_info(target_name=None):
    return {cid: {"target_name": c.target_name} for cid, c in get_comm_manager().comms.items()
            if target_name is None or c.target_name == target_name}


def hook_comm_package(module):
    """Makes the `comm` package create pyc comms (called right after it is imported)."""
    module.create_comm = create_comm
    module.get_comm_manager = get_comm_manager
