"""The magics that ipykernel's shell adds to IPython's (its KernelMagics), as pyc's own, so that they work with
or without IPython: %connect_info, %qtconsole, %less, %more, %man and %clear.

Where the kernel's connection is comes from _pyc.connection() (the kernel keeps it in C: start-up runs no
Python for it).
"""

import json
import os
import sys



def _connection():
    """(the connection file a client would use, or None; its contents), or (None, None) before the kernel
    said."""
    import _pyc

    c = _pyc.connection() if hasattr(_pyc, "connection") else None
    return (c["file"], c["info"]) if c else (None, None)


def _usage_error(message):
    from ._magics import UsageError

    return UsageError(message)


def magic_connect_info(line, frame):
    """Print the information for connecting other clients to this kernel: the contents of its connection
    file, and how a local client (jupyter console, qtconsole) connects with it."""
    path, info = _connection()
    if info is None:
        import warnings

        warnings.warn("Could not get connection info: the kernel has not said where it listens")
        return None
    shown = path or "<file>"
    if path:
        try:
            from jupyter_core.paths import jupyter_runtime_dir

            if os.path.dirname(os.path.abspath(path)) == os.path.abspath(jupyter_runtime_dir()):
                shown = os.path.basename(path)
        except Exception:
            pass
    print(json.dumps(info, indent=2) + "\n")
    print("Paste the above JSON into a file, and connect with:\n"
          "    $> jupyter <app> --existing <file>\n"
          "or, if you are local, you can connect with just:\n"
          "    $> jupyter <app> --existing %s\n"
          "or even just:\n"
          "    $> jupyter <app> --existing\n"
          "if this is the most recent Jupyter kernel you have started." % shown)
    return None


def magic_qtconsole(line, frame):
    """Open a Jupyter QtConsole connected to this kernel (needs the qtconsole package: apt install
    jupyter-qtconsole); extra arguments go to it.  When it cannot start, a warning says why and the cell goes
    on, as in ipykernel."""
    import shlex
    import shutil
    import subprocess
    import warnings

    path = _connection()[0]
    argv = [shutil.which("jupyter-qtconsole")]
    if argv[0] is None:
        import importlib.util

        argv = [sys.executable, "-m", "qtconsole"] if importlib.util.find_spec("qtconsole") is not None else None
    if not path or argv is None:
        warnings.warn("Could not start qtconsole: %s" % (
            "this kernel has no connection file to give it" if not path else
            "the Jupyter QtConsole is not installed (apt install jupyter-qtconsole, or pip install qtconsole); "
            "%connect_info says how to connect another client"))
        return None
    from ._system import _child_env

    subprocess.Popen(argv + ["--existing", path] + shlex.split(line), stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_child_env(), start_new_session=True)
    return None


def magic_less(line, frame):
    """Show a file in the pager: %less FILE (%more is the same)."""
    from . import _help

    name = os.path.expanduser(line.strip())
    if not name:
        raise _usage_error("Missing filename.")
    with open(name, encoding="utf-8", errors="replace") as f:
        _help.show(f.read())
    return None


def magic_man(line, frame):
    """Show a command's manual page in the pager: %man COMMAND."""
    from . import _help, _system

    if not line.strip():
        raise _usage_error("%man: which manual page?")
    _help.show("\n".join(_system.output("man %s | col -b" % line.strip())))
    return None


def magic_clear(line, frame):
    """Clear the terminal (a console client's screen); in a notebook, clears the cell's output so far."""
    import _pyc

    from ._system import flush

    flush()
    _pyc.publish("clear_output", {"wait": False})
    return None
