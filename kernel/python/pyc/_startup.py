"""The start-up files an IPython kernel runs, run by pyc at start (README "Start-up files").

src/py/startup.c imports this module only when there is something to run (PYTHONSTARTUP is set, or a
startup directory exists) and calls run().  It follows IPython's InteractiveShellApp._run_startup_files,
which ipykernel's IPKernelApp inherits (IPython/core/shellapp.py):

  1. the file named by PYTHONSTARTUP (exec_PYTHONSTARTUP is True by default), found as a path or in the
     IPython directory; an error in it is reported and the profile's files still run;
  2. every *.py and *.ipy file of the startup directories (the profile's, then the system's), in the
     sorted order of their full paths; the first that fails stops the rest, as in IPython.

Each runs in the user namespace (__main__) as IPython's _exec_file runs it: __file__ is the file's name
and sys.argv is [its path] while it runs, its directory is first on sys.path, and it does not share
__future__ imports with the cells.  SystemExit with no code or 0 ends a file quietly.  A .ipy file needs
IPython: it runs in the IPython shell bound to the kernel when IPython is importable, and is otherwise
left out with a note.  IPython is imported only for a .ipy file.

What the files print, and each failure with its traceback, go to the kernel's log (its stderr), since
there is no request yet whose output it could be.
"""

import os
import sys

_PREFIX = "pyc-kernel: "


class _Log:
    """A text stream onto the kernel's log descriptor (sys.stdout and sys.stderr while a file runs)."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, fd):
        self.fd = fd

    def write(self, text):
        data = text.encode("utf-8", "replace")
        while data:
            try:
                n = os.write(self.fd, data)
            except InterruptedError:
                continue
            except OSError:
                break
            data = data[n:]
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return False

    def fileno(self):
        return self.fd


def _ipython_dir():
    d = os.environ.get("IPYTHONDIR") or os.path.join("~", ".ipython")
    return os.path.normpath(os.path.expanduser(d))


def _find(name):
    """The path IPython's filefind(name, ['.', ipython_dir]) gives, or None."""
    name = os.path.expanduser(name)
    if os.path.isabs(name):
        return name if os.path.isfile(name) else None
    for base in (os.getcwd(), _ipython_dir()):
        path = os.path.join(base, name)
        if os.path.isfile(path):
            return path
    return None


def _report(log, what):
    """Writes the exception being handled to the log: a line that says what failed, then its traceback
    without this module's frames."""
    import traceback

    etype, value, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_globals.get("__name__") == __name__:
        tb = tb.tb_next
    if isinstance(value, SystemExit):
        body = "SystemExit: %r\n" % (value.code,)
    else:
        body = "".join(traceback.format_exception(etype, value, tb))
    log.write("%s%s:\n%s" % (_PREFIX, what, body))


def _shell():
    """The IPython shell bound to the kernel, or None when IPython is not importable or not hosted."""
    from pyc import _shell

    return _shell.get_ipython() if _shell._ipython_importable() else None


def _exec(path, ns):
    """Runs one file; exceptions propagate (SystemExit with no code or 0 does not)."""
    if path.endswith(".ipy"):
        shell = _shell()
        if shell is None:
            return "IPython is not importable (or PYC_IPYTHON=0)"
        shell.safe_execfile_ipy(path, shell_futures=False, raise_exceptions=True)
        return None
    with open(path, "rb") as f:
        source = f.read()
    code = compile(source, path, "exec", dont_inherit=True)
    try:
        exec(code, ns)
    except SystemExit as e:
        if e.code:
            raise
    return None


def _run_file(log, name, ns, after_failure):
    """Runs the file named name as IPython's _exec_file does.  Returns True when it failed (the failure is
    logged, followed by after_failure)."""
    path = _find(name)
    if path is None:
        log.write("%sstart-up file not found: %r\n" % (_PREFIX, name))
        return False
    missing = object()
    saved_file, saved_argv = ns.get("__file__", missing), sys.argv
    here = os.path.dirname(path)
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    ns["__file__"] = name
    sys.argv = [path]
    try:
        why_not = _exec(path, ns)
        if why_not is not None:
            log.write("%sstart-up file %s not run: it needs IPython, and %s\n" % (_PREFIX, path, why_not))
        return False
    except BaseException:
        _report(log, "start-up file %s failed%s" % (path, after_failure))
        return True
    finally:
        sys.argv = saved_argv
        if saved_file is missing:
            ns.pop("__file__", None)
        else:
            ns["__file__"] = saved_file
        if added:
            try:
                sys.path.remove(here)
            except ValueError:
                pass


def _listing(dirs):
    files = []
    for d in reversed(dirs):
        try:
            with os.scandir(d) as it:
                files += [e.path for e in it if not e.name.startswith(".") and e.name.endswith((".py", ".ipy"))]
        except OSError:
            continue
    return sorted(files)


def run(log_fd, pythonstartup, dirs):
    """Runs PYTHONSTARTUP's file (pythonstartup, or None), then the startup files of dirs (the startup
    directories that exist, in IPython's order).  Never raises for a file's error: it is logged."""
    log = _Log(log_fd)
    ns = sys.modules["__main__"].__dict__
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = log
    try:
        if pythonstartup:
            _run_file(log, pythonstartup, ns, " (PYTHONSTARTUP; the profile's start-up files still run)")
        for path in _listing(dirs):
            if _run_file(log, path, ns, " (the start-up files after it were not run, as in IPython)"):
                break
    finally:
        sys.stdout, sys.stderr = saved
