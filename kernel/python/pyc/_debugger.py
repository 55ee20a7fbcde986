"""The Python half of the kernel's debugger (the C half, src/kernel/debugger.c, relays DAP between the
front end and debugpy's adapter without the GIL, and calls these functions only for the commands that must
look at Python objects).

Nothing here imports debugpy until a debug session starts (the kernel looks for it without importing this
module, py.h's pyc_py_debugger_available).  start() runs
debugpy.listen once per process and returns the adapter's port; trace_this_thread() makes pydevd trace the
calling thread (the kernel calls it on the main thread before the first cell of a debug session, because
listen() ran on the debugger's own thread); the variable functions answer inspectVariables and variables
while no thread is stopped, with pydevd's own variable objects (so that the references they hand out work
with the front end's variables requests, as in ipykernel); value_of() finds the object that
richInspectVariables formats: a global of the session, or the value that stash() kept when the kernel had
debugpy evaluate it in a stopped frame.
"""

import os
import sys

from pyc._shell import is_kernel_name

_port = None          # the adapter's port, once debugpy listens
_explorer = None      # the variable explorer of the last inspectVariables
_stashed = {}         # token -> an object kept by stash() in a stopped frame, until value_of() takes it


def start(host="127.0.0.1"):
    """Starts debugpy's adapter listening on host (once per process) and returns {"port": N}."""
    global _port
    if _port is None:
        # The embedded interpreter has frozen standard modules; pydevd's warning about them is noise here.
        os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        import debugpy

        debugpy.configure(python=sys.executable)
        _host, _port = debugpy.listen((host, 0))
    return {"port": _port}


def trace_this_thread():
    """Makes the debugger trace the calling thread (a no-op before start())."""
    if _port is not None:
        import debugpy

        debugpy.debug_this_thread()
    return {}


def _accept(name):
    """The variables the variable explorer shows: not the kernel's own names, nor dunders."""
    return not (name.startswith("__") and name.endswith("__")) and not is_kernel_name(name) and name not in (
        "get_ipython", "exit", "quit", "debugpy")


class _FakeCode:
    def __init__(self, co_filename, co_name):
        self.co_filename = co_filename
        self.co_name = co_name


class _FakeFrame:
    def __init__(self, f_code, f_globals, f_locals):
        self.f_code = f_code
        self.f_globals = f_globals
        self.f_locals = f_locals
        self.f_back = None


class _Explorer:
    """The session's globals as a pydevd frame, so that pydevd lays the variables out and keeps the
    references of their children."""

    def __init__(self):
        from debugpy.server import api  # noqa: F401 -- sets up the paths of the vendored pydevd
        from _pydevd_bundle import pydevd_frame_utils
        from _pydevd_bundle.pydevd_api import PyDevdAPI
        from _pydevd_bundle.pydevd_suspended_frames import SuspendedFramesManager, _FramesTracker

        class _PyDB:
            variable_presentation = PyDevdAPI.VariablePresentation()

        self.manager = SuspendedFramesManager()
        self.tracker = _FramesTracker(self.manager, _PyDB())
        ns = sys.modules["__main__"].__dict__
        self.frame = _FakeFrame(_FakeCode("<module>", "<session>"), ns, ns)
        self.tracker.track("thread1", pydevd_frame_utils.create_frames_list_from_frame(self.frame))

    def children(self, ref=None):
        found = self.manager.get_variable(ref or id(self.frame))
        return [v.get_var_data() for v in found.get_children_variables()]

    def close(self):
        self.tracker.untrack_all()


def inspect_variables():
    """{"variables": [...]}: the session's globals, as DAP variables."""
    global _explorer
    if _explorer is not None:
        _explorer.close()
    _explorer = _Explorer()
    return {"variables": [v for v in _explorer.children() if _accept(v["name"])]}


def variables(ref):
    """{"variables": [...]}: the children of a variable that inspect_variables handed out."""
    global _explorer
    if _explorer is None:
        _explorer = _Explorer()
    try:
        found = _explorer.children(int(ref))
    except (KeyError, ValueError, TypeError):
        found = []
    return {"variables": [v for v in found if _accept(v["name"])]}


def stash(value):
    """Evaluated by debugpy in a stopped frame (richInspectVariables): keeps value for value_of()."""
    token = "s%d" % len(_stashed)
    _stashed[token] = value
    return token


def value_of(which):
    """The object a richInspectVariables request names: ("stash", token) or ("global", name).  Raises
    NameError or KeyError when there is none."""
    kind, key = which
    if kind == "stash":
        return _stashed.pop(key)
    return sys.modules["__main__"].__dict__[key]


def modules(start=0, count=None):
    """{"modules": [...], "totalModules": N}: the loaded modules that have Python source."""
    mods = list(sys.modules.values())
    end = len(mods) if count is None else min(len(mods), start + count)
    out = []
    for i in range(max(0, start), end):
        spec = getattr(mods[i], "__spec__", None)
        origin = getattr(spec, "origin", None)
        if isinstance(origin, str) and origin.endswith(".py"):
            out.append({"id": i, "name": mods[i].__name__, "path": origin})
    return {"modules": out, "totalModules": len(mods)}
