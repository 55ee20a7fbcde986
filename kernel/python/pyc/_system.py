"""Shell commands for a cell: what !cmd, x = !cmd and IPython's shell.system run, once the command is expanded.

run(cmd) streams the command's stdout and stderr into the cell as they come (through the kernel's own
runner, _pyc.system, when there is one) and returns its exit status; run_script(argv, script) does the
same for a program given a script on stdin (%%bash); output(cmd) returns its output as an SList of
lines.  Neither expands $name or {expr}: pyc._magics does that from the cell's namespace, and IPython's
shell with its own var_expand.  The child never inherits the MPLBACKEND that selects pyc's
matplotlib backend (a child Python cannot import pyc).
"""

import os
import sys

BACKEND = "module://pyc.mpl_backend"


class SList(list):
    """The lines of a command's output (`x = !cmd`), with IPython's SList shortcuts .s, .n and .l."""

    @property
    def s(self):
        """The lines joined by spaces."""
        return " ".join(self)

    @property
    def n(self):
        """The lines joined by newlines."""
        return "\n".join(self)

    @property
    def l(self):  # noqa: E743
        """The lines as a plain list."""
        return list(self)


def _child_env():
    """The environment of shell commands: the kernel's, without the MPLBACKEND that selects pyc's backend
    (a child Python cannot import pyc)."""
    if os.environ.get("MPLBACKEND") != BACKEND:
        return None
    env = dict(os.environ)
    del env["MPLBACKEND"]
    return env


def flush():
    """Publishes what the cell printed so far, so that a command's output comes after it."""
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:
            pass


def run(cmd):
    """Runs cmd with /bin/sh, its output going to the cell's stdout and stderr as it comes; returns its exit
    status."""
    flush()
    rc = None
    try:
        import _pyc

        run = getattr(_pyc, "system", None)
    except ImportError:
        run = None
    if run is not None:
        # the kernel's own runner; the child must not inherit pyc's MPLBACKEND (see _child_env)
        saved = os.environ.pop("MPLBACKEND") if os.environ.get("MPLBACKEND") == BACKEND else None
        try:
            rc = run(cmd)
        finally:
            if saved is not None:
                os.environ["MPLBACKEND"] = saved
    else:
        rc = _run_streaming(cmd)
    return rc


def run_script(argv, script, stdout=None, stderr=None):
    """Runs argv (a program that reads a script on its stdin: bash, python3) with script on its stdin, as
    IPython's script magics do, its output going to the cell's stdout and stderr as it comes (or to the
    given streams); returns its exit status (-N for a signal).  FileNotFoundError when there is no such
    program."""
    flush()
    return _run_streaming(argv, shell=False, stdin_data=script.encode("utf-8", "replace"), stdout=stdout,
                          stderr=stderr)


def _run_streaming(cmd, shell=True, stdin_data=None, stdout=None, stderr=None):
    """Runs cmd, copying its output to sys.stdout and sys.stderr (or to stdout and stderr when given) as it
    comes; stdin_data (bytes), when given, is written to its stdin as it reads it (a script longer than a
    pipe holds cannot deadlock with the output it makes), and stdin is closed after it."""
    import codecs
    import selectors
    import signal
    import subprocess

    p = subprocess.Popen(
        cmd,
        shell=shell,
        stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_child_env(),
    )
    sel = selectors.DefaultSelector()
    outs = {
        p.stdout.fileno(): (stdout or sys.stdout, codecs.getincrementaldecoder("utf-8")("replace")),
        p.stderr.fileno(): (stderr or sys.stderr, codecs.getincrementaldecoder("utf-8")("replace")),
    }
    for fd in outs:
        sel.register(fd, selectors.EVENT_READ)
    pending = memoryview(stdin_data) if stdin_data is not None else None
    if pending is not None:
        os.set_blocking(p.stdin.fileno(), False)
        sel.register(p.stdin.fileno(), selectors.EVENT_WRITE)
    try:
        while outs:
            for key, _ in sel.select():
                fd = key.fd
                if pending is not None and fd == p.stdin.fileno():
                    try:
                        pending = pending[os.write(fd, pending[:65536]):]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:      # the program ended without reading it all
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(fd)
                        p.stdin.close()
                        pending = None
                    continue
                data = os.read(fd, 65536)
                stream, dec = outs[fd]
                if not data:
                    text = dec.decode(b"", final=True)
                    sel.unregister(fd)
                    del outs[fd]
                else:
                    text = dec.decode(data)
                if text:
                    stream.write(text)
                    stream.flush()
        return p.wait()
    except BaseException:
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGINT)
                p.wait(1)
            except Exception:
                p.kill()
                p.wait()
        raise
    finally:
        sel.close()
        p.stdout.close()
        p.stderr.close()
        if p.stdin is not None:
            p.stdin.close()


def output(cmd):
    """Runs cmd and returns its output (stdout and stderr together) as an SList of lines."""
    import subprocess

    flush()
    r = subprocess.run(
        cmd,
        shell=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=_child_env(),
    )
    return SList(r.stdout.decode("utf-8", "replace").splitlines())
