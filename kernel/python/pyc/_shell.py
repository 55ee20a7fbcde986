"""The notebook's namespace as IPython keeps it, without IPython; and the seam to an IPython shell.

The kernel calls, for every cell that is not silent:
    pre_cell(count, code, store_history)  before it runs (returns True when a shell wants post_cell)
    store_result(obj)                     from sys.displayhook, for the value of the cell's last expression
    post_cell(ok, error)                  after it ran, only when pre_cell returned True
which keep, as IPython does (IPython/core/history.py, displayhook.py):
    In, _ih        the cells' sources, In[n] being cell n (In[0] is '')
    Out, _oh       the results, by execution count
    _i _ii _iii    the sources of the last three cells before this one; _iN the source of cell N
    _ __ ___       the last three results (unless the user assigned one of them); _N the result of cell N
    _dh            the working directories (the first one only: pyc's %cd does not record them)

When IPython is importable (and PYC_IPYTHON is not 0), get_ipython is a builtin, as in ipykernel: calling it, or importing IPython
anywhere, makes the IPython shell bound to the kernel (pyc._ipython), and from then on the shell keeps
these names and fires its events around every cell.  Without IPython nothing of it is imported, and
get_ipython is not defined (libraries test for a NameError).

kernel() is the `kernel` object that libraries written for ipykernel reach for (comm_manager, the parent
message of output they publish); it exists with or without IPython.
"""

import builtins
import os
import sys

_ns = None               # the user namespace, __main__.__dict__
_results = ["", "", ""]  # what this module last put in _, __, ___
_source = ""             # the source of the last cell recorded (IPython's _i00)
count = 0                # the execution count of the running (or last) cell
host = None              # pyc._ipython's shell once it exists: it then keeps the names itself


# The names the kernel binds in the user's namespace itself (here, and IPython's shell: get_ipython, exit,
# quit): a whole-namespace pickle get and a fork-isolated cell's merge leave them alone.  Those below, and
# _N and _iN for any decimal N.  (Written without re, which the kernel does not import at start.)
_KERNEL_NAMES = frozenset(("In", "Out", "_ih", "_oh", "_dh", "get_ipython", "exit", "quit", "_", "__", "___",
                           "_i", "_ii", "_iii"))


def is_kernel_name(name):
    """True for In, Out, _, _N, _iN and the other names the kernel keeps itself."""
    if name in _KERNEL_NAMES:
        return True
    if name[:1] != "_":
        return False
    digits = name[2:] if name[:2] == "_i" else name[1:]
    return digits.isdecimal()


def _namespace():
    global _ns
    if _ns is None:
        _ns = sys.modules["__main__"].__dict__
        _setup(_ns)
    return _ns


def _setup(ns):
    inputs, outputs = [""], {}
    ns.update(In=inputs, _ih=inputs, Out=outputs, _oh=outputs, _dh=[os.getcwd()],
              _="", __="", ___="", _i="", _ii="", _iii="")
    ns.setdefault("__builtin__", builtins)
    if "get_ipython" not in builtins.__dict__ and _ipython_importable():
        builtins.get_ipython = get_ipython


def hosting():
    """False when the kernel was told not to host IPython (PYC_IPYTHON=0): IPython is then a plain library."""
    return os.environ.get("PYC_IPYTHON", "1") != "0"


def _ipython_importable():
    from importlib.machinery import PathFinder

    if not hosting():
        return False
    try:
        return "IPython" in sys.modules or PathFinder.find_spec("IPython") is not None
    except Exception:
        return False


def get_ipython():
    """The IPython shell of this kernel, made on first use (imports IPython; None when it cannot)."""
    if host is None and hosting():
        try:
            # Importing IPython makes the shell already (pyc._ipython.attach_after_import); attach() then
            # returns it, or makes it when IPython was imported before hosting could hook it.
            import IPython  # noqa: F401
            from pyc import _ipython

            _ipython.attach()
        except Exception:
            return None
    return host


def prepare_fork():
    """Before a kernel first forks: sets the namespace up now (In, Out, the look for IPython), as the first
    recorded cell would, so that its forked sessions share what it wrote instead of each writing its own.
    Not when an IPython shell keeps the namespace already: its In and Out are the ones to keep."""
    if host is None:
        _namespace()


def let_go():
    """At the end of a forked session (pyc_py_finish), after __main__ let go of its values: the results kept
    here and by a hosted IPython shell (Out, _, __, ___) go too, and one collection finds what only cycles
    held, so that their finalizers run (a file written to and never closed is flushed), as the interpreter's
    own finalization would have done."""
    import gc

    _results[:] = ["", "", ""]
    if host is not None:
        try:
            host.displayhook.flush()
        except Exception:
            pass
    gc.collect()


def pre_cell(n, code, store_history):
    """Before cell n: records its source (when it counts in the history); True when post_cell is wanted."""
    global count, _source
    count = n
    if host is not None:
        return host.pyc_pre_cell(n, code, store_history)
    if not store_history:
        return False
    ns = _namespace()
    inputs = ns.get("_ih")
    source = code.rstrip("\n")
    if isinstance(inputs, list):
        while len(inputs) < n:
            inputs.append("")
        if len(inputs) == n:
            inputs.append(source)
        else:
            inputs[n] = source
    ns["_iii"], ns["_ii"], ns["_i"] = ns.get("_ii", ""), ns.get("_i", ""), _source
    _source = source
    ns["_i%d" % n] = source
    return False


def inputs_since(n):
    """The sources of the cells after cell n (In[n+1:]), which a restored snapshot takes over so that In
    keeps every cell the session ran (a snapshot's own In ends at the cell it was taken after)."""
    inputs = _namespace().get("_ih")
    return [str(s) for s in inputs[n + 1:]] if isinstance(inputs, list) else []


def resume(n, sources):
    """In a snapshot just restored, which holds cells up to n: In gets the sources of the cells run since
    (they ran, and were undone; the history has them too), so that In[k] stays cell k."""
    inputs = _namespace().get("_ih")
    if not isinstance(inputs, list) or host is not None:
        return None
    del inputs[n + 1:]
    while len(inputs) < n + 1:
        inputs.append("")
    inputs.extend(str(s) for s in sources)
    return None


def post_cell(ok, error):
    if host is not None:
        host.pyc_post_cell(ok, error)


def cache_size():
    """How many results Out and _N keep: PYC_CACHE_SIZE, IPython's InteractiveShell.cache_size (default 1000);
    0 (or 1 or 2, which IPython refuses too) keeps none."""
    try:
        n = int(os.environ.get("PYC_CACHE_SIZE", "1000"))
    except ValueError:
        n = 1000
    return n if n >= 3 else 0


def _cull(ns, outputs):
    """Out is full: drops its oldest fifth (at least 2) and their _N, and says so as IPython does (a
    UserWarning on stderr), so that a session's results do not grow without a bound."""
    import warnings

    cull_count = max(int(len(outputs) * 0.2), 2)
    warnings.warn("Output cache limit (currently %d entries) hit.\nFlushing oldest %d entries."
                  % (len(outputs), cull_count), stacklevel=2)
    # Keys the user put in Out that are not counts are left alone (and cannot make the sort fail).
    for n in sorted(k for k in outputs if type(k) is int)[:cull_count]:
        ns.pop("_%d" % n, None)
        outputs.pop(n, None)


def store_result(obj, n):
    """Keeps a cell's result as _, __, ___, _N and Out[N], as IPython's displayhook does: within
    cache_size() results, the oldest fifth dropped when Out is full, and none kept when it is 0."""
    ns = _namespace()
    outputs = ns.get("_oh")
    size = cache_size()
    if obj is outputs or size == 0:
        return
    if isinstance(outputs, dict) and len(outputs) >= size:
        _cull(ns, outputs)
    # A name of these three that the user assigned is left alone, and so are the others then; and none of
    # them is touched when a builtin _ exists (gettext installs one).
    mine = all(ns.get(name, kept) is kept for name, kept in zip(("_", "__", "___"), _results))
    _results[:] = [obj, _results[0], _results[1]]
    if mine and "_" not in builtins.__dict__:
        ns["_"], ns["__"], ns["___"] = _results
    ns["_%d" % n] = obj
    if isinstance(outputs, dict):
        outputs[n] = obj


# ---- the kernel as ipykernel libraries see it ---------------------------------------------------------------


class _Socket:
    """Stands for a ZeroMQ socket in session.send(kernel.iopub_socket, ...)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "<pyc %s channel>" % self.name


class _Session:
    """The part of jupyter_client's Session that libraries call on a kernel: send() on iopub."""

    def __init__(self, kernel):
        self._kernel = kernel

    def send(self, stream, msg_or_type, content=None, parent=None, ident=None, buffers=None, track=False,
             header=None, metadata=None):
        import _pyc

        if isinstance(msg_or_type, dict):
            content = msg_or_type.get("content", content)
            metadata = msg_or_type.get("metadata", metadata)
            msg_or_type = msg_or_type["header"]["msg_type"]
        if stream is not self._kernel.iopub_socket:
            raise ValueError("pyc: a kernel's session sends only on iopub, not on %r" % (stream,))
        _pyc.publish(msg_or_type, content or {}, metadata, buffers)


class Kernel:
    """What libraries written for ipykernel use of `get_ipython().kernel` and of Comm.kernel."""

    implementation = "pyc"

    def __init__(self):
        self.iopub_socket = _Socket("iopub")
        self.session = _Session(self)

    @property
    def comm_manager(self):
        from pyc._comm import get_comm_manager

        return get_comm_manager()

    def get_parent(self, channel="shell"):
        """The request being answered: {"header", "parent_header", "metadata", "msg_id", "msg_type"}."""
        import _pyc

        return _pyc.parent()

    @property
    def _parent_header(self):
        return self.get_parent()

    @property
    def shell(self):
        return host

    def __repr__(self):
        return "<pyc kernel>"


_kernel = None


def kernel():
    global _kernel
    if _kernel is None:
        _kernel = Kernel()
    return _kernel
