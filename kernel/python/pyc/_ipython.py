"""An IPython shell bound to the kernel, made when IPython is first imported (never at start).

Libraries that work in Jupyter look for IPython's shell: IPython.display publishes only through one,
ipywidgets registers its comm target only when get_ipython() is not None, rich and plotly choose their
notebook output by its class, tqdm.auto by its config, sympy and rich register formatters with it, and
%autoreload lives on its events.  pyc runs cells itself (src/py/exec.c); this shell is there for all that:

  * ZMQInteractiveShell (the name is ipykernel's: rich and others test for it) is an InteractiveShell whose
    user namespace is the kernel's __main__, whose display publisher and displayhook publish through the
    kernel (_pyc.publish), and whose formatters therefore decide the MIME bundles of results and of
    IPython.display.display from then on;
  * around every cell the kernel calls pyc_pre_cell and pyc_post_cell, which keep In/Out/_N/_iN in the
    shell's history and fire pre_execute, pre_run_cell, post_execute and post_run_cell, and hand the
    shell's payloads (set_next_input, ...) to the execute_reply;
  * magics that pyc does not implement itself run here (pyc._magics calls run_line_magic/run_cell_magic);
  * `kernel` is pyc._shell's Kernel (comm_manager, get_parent, session.send on iopub);
  * showtraceback (ipywidgets callbacks, %%capture) publishes an `error` for the current request;
  * IPython's pager (%quickref, %magic, %prun's report, %pinfo, %less) is the execute_reply's "page"
    payload, as in ipykernel, not stdout;
  * the magics registered with the shell join _pyc.automagic_names, so that a one-line cell may name them
    without their '%'; and its post_execute event (which a nested run_cell, %%capture's, fires) publishes
    the figures that cell drew, where %%capture can keep them.

The shell keeps no history file (HistoryManager.enabled is False: pyc keeps its own), loads no profile
configuration and runs no startup files; its `config` has an IPKernelApp section, as ipykernel's does.
"""

import sys

import _pyc
from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher
from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult, InteractiveShell
from traitlets import Any, Type
from traitlets.config import Config

from pyc import _shell, _system
from pyc._system import flush as _flush

class PycDisplayPublisher(DisplayPublisher):
    """IPython.display.display and friends, published for the current request."""

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
        _flush()
        _pyc.publish_bundle("update_display_data" if update else "display_data", data or {}, metadata or {},
                            transient or {})

    def clear_output(self, wait=False):
        _flush()
        _pyc.publish("clear_output", {"wait": bool(wait)})


class PycDisplayHook(DisplayHook):
    """The value of a cell's last expression, formatted by the shell's formatters, as execute_result."""

    def start_displayhook(self):
        self._pyc_data = None

    def write_output_prompt(self):
        pass

    def write_format_data(self, format_dict, md_dict=None):
        self._pyc_data = (format_dict, md_dict)

    def finish_displayhook(self):
        _flush()
        if self._pyc_data and self._pyc_data[0]:
            data, md = self._pyc_data
            _pyc.publish_bundle("execute_result", data, md or {}, None, self.prompt_count)
        self._pyc_data = None


class ZMQInteractiveShell(InteractiveShell):
    """IPython's InteractiveShell, publishing through the pyc kernel."""

    displayhook_class = Type(PycDisplayHook)
    display_pub_class = Type(PycDisplayPublisher)
    kernel = Any()
    parent_header = Any()

    def init_hooks(self):
        super().init_hooks()
        from IPython.core import page

        self.set_hook("show_in_pager", page.as_hook(_pager), 99)

    def init_environment(self):
        # As ipykernel: no pager can be driven over a notebook, so none is started.
        import os

        os.environ.update(TERM="xterm-color", CLICOLOR="1", PAGER="cat", GIT_PAGER="cat")

    def init_virtualenv(self):
        pass

    def init_data_pub(self):
        pass

    def enable_gui(self, gui=None):
        # pyc has no GUI event loops; %matplotlib is pyc's own magic.
        if gui not in (None, "inline"):
            from IPython.core.error import UsageError

            raise UsageError("pyc runs no GUI event loop (%r); use %%matplotlib inline" % (gui,))

    def system(self, cmd):
        """shell.system (%pip, %sx, ...) through pyc's runner: the output streams into the cell.  cmd is
        expanded here once, as IPython does, and not again by pyc."""
        self.user_ns["_exit_code"] = _system.run(self.var_expand(cmd, depth=1))

    system_piped = system

    def getoutput(self, cmd, split=True, depth=0):
        return _system.output(self.var_expand(cmd, depth=depth + 1))

    def _showtraceback(self, etype, evalue, stb):
        _flush()
        _pyc.publish("error", {"ename": str(etype.__name__), "evalue": str(evalue), "traceback": stb})
        self._last_traceback = stb

    def set_next_input(self, text, replace=False):
        self.payload_manager.write_payload({"source": "set_next_input", "text": text, "replace": replace})

    def ask_exit(self):
        self.payload_manager.write_payload({"source": "ask_exit", "keepkernel": False})

    def get_parent(self):
        return _pyc.parent()

    # -- the kernel's calls around each cell

    def pyc_set_count(self, count):
        """Makes the shell's execution_count say that cell count is the one running, in the convention of
        this IPython: 8 adds one to it after a cell has run (the running cell is execution_count), 9 before
        (the running cell is execution_count - 1, the number its displayhook's prompt_count, Out[N], _N and
        the history's outputs use).  Probed once on the displayhook, not by version number."""
        ahead = getattr(self, "_pyc_ahead", None)
        if ahead is None:
            saved = self.execution_count
            self.execution_count = 10
            ahead = self._pyc_ahead = self.displayhook.prompt_count == 9
            self.execution_count = saved
        self.execution_count = count + 1 if ahead else count

    def pyc_pre_cell(self, count, code, store_history):
        self.pyc_set_count(count)
        self._pyc_count = count
        self._pyc_info = ExecutionInfo(code, store_history, False, True, None)
        if store_history:
            self.history_manager.store_inputs(count, code, code)
        self.events.trigger("pre_execute")
        self.events.trigger("pre_run_cell", self._pyc_info)
        return True

    def pyc_post_cell(self, ok, error):
        result = ExecutionResult(self._pyc_info)
        result.execution_count = getattr(self, "_pyc_count", self.execution_count)
        result.error_in_exec = error
        self.last_execution_succeeded = bool(ok)
        self.last_execution_result = result
        try:
            self.events.trigger("post_execute")
            self.events.trigger("post_run_cell", result)
        finally:
            for payload in self.payload_manager.read_payload():
                _pyc.add_payload(payload)
            self.payload_manager.clear_payload()
            # Only when magics were registered since: the set already holds the ones it had.
            line_magics = self.magics_manager.magics["line"]
            if len(line_magics) != getattr(self, "_pyc_line_magics", 0):
                self._pyc_line_magics = len(line_magics)
                getattr(_pyc, "automagic_names", set()).update(line_magics)


def attach_after_import(module):
    """Run by the kernel's importer right after IPython is imported: makes the shell, or says on stderr why
    it could not (the import itself stands)."""
    if not _shell.hosting():
        return
    try:
        attach()
    except Exception as e:
        print("pyc: IPython %s was imported, but its shell could not be made: %s: %s"
              % (getattr(module, "__version__", "?"), type(e).__name__, e), file=sys.stderr)


def attach():
    """Makes the shell (once), bound to the kernel's namespace."""
    if _shell.host is not None or InteractiveShell.initialized():
        return _shell.host
    main = sys.modules["__main__"]
    ns = main.__dict__
    kept = {name: ns.get(name) for name in ("In", "Out")}
    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.cache_size = _shell.cache_size()   # Out's bound, PYC_CACHE_SIZE, kept by the shell too
    config.IPKernelApp.kernel_class = "pyc"        # tqdm.auto and others look for this section
    shell = ZMQInteractiveShell.instance(config=config, user_module=main, user_ns=ns,
                                         kernel=_shell.kernel())
    # The cells and results of the session so far, kept by pyc._shell until now.
    if isinstance(kept["In"], list):
        shell.history_manager.input_hist_parsed[:] = kept["In"]
        shell.history_manager.input_hist_raw[:] = kept["In"]
    if isinstance(kept["Out"], dict):
        shell.history_manager.output_hist.update(kept["Out"])
    shell.pyc_set_count(_shell.count)
    # Where libraries look for a kernel's shell (tqdm.autonotebook tests "ipykernel.zmqshell" in sys.modules).
    if "ipykernel.zmqshell" not in sys.modules:
        import importlib

        sys.modules["ipykernel.zmqshell"] = importlib.import_module("pyc._ipykernel_zmqshell")
    hook = shell.displayhook
    hook._, hook.__, hook.___ = (ns.get(name, "") for name in ("_", "__", "___"))
    sys.displayhook = hook
    # IPython's run_cell (a .ipy start-up file, user code calling it) enters the display trap, which keeps
    # the hook it replaces only when sys.displayhook is not already the shell's, and puts that back on exit:
    # None here, unless the trap starts out knowing the hook.
    shell.display_trap.old_hook = hook
    # The kernel's cells run with the shell's hook as sys.displayhook, as if inside IPython's display trap:
    # it counts as entered once for the shell's life, so that a nested run_cell (%%capture's) leaves the
    # hook that capture_output put there instead of setting the shell's own over it.
    if hasattr(shell.display_trap, "_nested_level"):
        shell.display_trap._nested_level = 1
    shell.events.register("post_execute", _flush_figures)
    _shell.host = shell
    return shell


def _pager(strng, start=0, screen_lines=0, pager_cmd=None):
    """IPython's pager, as ipykernel's payloadpage: the text (or a MIME bundle) as the "page" payload of the
    current execute_reply, added at once (a shell made during the cell has no post_cell to hand it on)."""
    data = strng if isinstance(strng, dict) else {"text/plain": strng}
    _pyc.add_payload({"source": "page", "data": data, "start": max(0, start)})


def _flush_figures():
    """post_execute: the figures of the cell that ends, when pyc's matplotlib backend is in use.  At the end
    of a kernel's cell the kernel has flushed them already (nothing is left); in a nested run_cell
    (%%capture) they are published while its capture is on."""
    backend = sys.modules.get("pyc.mpl_backend")
    if backend is not None:
        backend.flush_figures()
