"""Runtime of the IPython-style lines that pyc._transform rewrites into calls of this module.

  !cmd, x = !cmd, !!cmd    system(cmd), getoutput(cmd)   (a shell command; its output, or its lines)
  obj?, obj??, ?obj        page(expr, level)             (help in the pager: pyc._help)
  %name args, x = %name    line_magic(name, args)        (the magics of LINE_MAGICS, and the shell aliases)
  %%name line              cell_magic(name, line, body)  (those of CELL_MAGICS; on a cell's first line)
  ls -l (automagic)        line_magic(name, args)        (a one-line cell naming a magic; pyc._transform)

The helpers run in the cell's frame's namespace (found with sys._getframe, so the generated code stays
short).  As in IPython, `!`, %cd and %env expand {expr} and $name from the namespace (all or nothing: if one
fails, the command is left as typed; $$ is a literal $); %time and %timeit do not.  Any other magic runs in
IPython's magic machinery (pyc._ipython's shell), when IPython is installed; without it they raise
UnknownMagic, whose message lists what pyc supports.  Wrong arguments raise UsageError.
"""

import os
import sys

from pyc import _system, _timetravel

BACKEND = _system.BACKEND


class UnknownMagic(Exception):
    """A %magic that pyc does not implement."""


class UsageError(Exception):
    """Wrong arguments to a magic that pyc implements."""


# ---- namespaces and expansion ----------------------------------------------------------------------------


def _namespaces(frame):
    """(globals, locals) of the cell's frame; locals is globals at a cell's top level."""
    g = frame.f_globals
    loc = frame.f_locals
    return g, loc


def _merged(frame):
    g, loc = _namespaces(frame)
    if loc is g:
        return g
    ns = dict(g)
    ns.update(loc)
    return ns


def expand(cmd, namespace):
    """IPython's variable expansion of shell commands and some magics' arguments: {expr} is replaced by
    str(eval(expr)), $name and $name.attr (outside single quotes) by the value, {{ }} and $$ by { } and $.
    If any expansion fails, cmd is returned unchanged (so that `awk '{print $1}'` and $HOME reach the shell
    as typed)."""
    if "{" not in cmd and "$" not in cmd and "}" not in cmd:
        return cmd
    out = []
    i = 0
    n = len(cmd)
    in_single = False
    try:
        while i < n:
            c = cmd[i]
            if c == "'":
                in_single = not in_single
                out.append(c)
                i += 1
            elif c == "{":
                if cmd.startswith("{{", i):
                    out.append("{")
                    i += 2
                    continue
                j = cmd.find("}", i + 1)
                if j < 0:
                    return cmd
                out.append(str(eval(cmd[i + 1 : j], namespace)))
                i = j + 1
            elif c == "}":
                if cmd.startswith("}}", i):
                    out.append("}")
                    i += 2
                    continue
                return cmd
            elif c == "$" and not in_single:
                if cmd.startswith("$$", i):
                    out.append("$")
                    i += 2
                    continue
                j = i + 1
                while j < n and (cmd[j].isalnum() or cmd[j] in "_."):
                    j += 1
                name = cmd[i + 1 : j].rstrip(".")
                if not name or name[0].isdigit():
                    out.append(c)
                    i += 1
                    continue
                out.append(str(eval(name, namespace)))
                i = i + 1 + len(name)
            else:
                out.append(c)
                i += 1
    except Exception:
        return cmd
    return "".join(out)


# ---- shell -----------------------------------------------------------------------------------------------


def system(cmd):
    """!cmd: expands cmd in the caller's namespace and runs it (pyc._system.run); sets _exit_code there and
    returns None (as IPython)."""
    frame = sys._getframe(1)
    frame.f_globals["_exit_code"] = _system.run(expand(cmd, _merged(frame)))
    return None


def getoutput(cmd):
    """x = !cmd and !!cmd: expands cmd in the caller's namespace and returns its output lines
    (pyc._system.output)."""
    return _system.output(expand(cmd, _merged(sys._getframe(1))))


# ---- magics ----------------------------------------------------------------------------------------------


def _ipython_shell(kind, name):
    """The IPython shell that runs the magics pyc does not implement; UnknownMagic when IPython is not
    installed."""
    shell = ipython_shell_if_installed()
    if shell is None:
        raise UnknownMagic("%s%s is an IPython magic, and IPython is not installed (python3-ipython provides "
                           "it; PYC_IPYTHON=0 also turns it off). %s" % (kind, name, supported()))
    return shell


def ipython_shell_if_installed():
    """pyc._ipython's shell, made on first use; None when IPython is not installed or hosting is off."""
    from pyc import _shell

    return _shell.get_ipython()


def own_magic(name, cell=False):
    """pyc's own implementation of %name (or %%name), or None.  The magics that IPython has and pyc only
    stands in for (%quickref, %magic, %lsmagic) count only when IPython is not there to run its own."""
    if cell:
        return _CELL.get(name)
    fn = _LINE.get(name)
    if fn is None and name in _WITHOUT_IPYTHON and not _ipython_installed():
        fn = _WITHOUT_IPYTHON[name]
    return fn


def own_magic_names():
    """(line magics, cell magics) that pyc runs by itself, sorted."""
    lines = set(_LINE)
    if not _ipython_installed():
        lines.update(_WITHOUT_IPYTHON)
    return sorted(lines), sorted(set(_CELL) | set(_KERNEL_CELL_MAGICS))


def supported():
    lines, cells = own_magic_names()
    return ("pyc supports by itself: !cmd, x = !cmd, obj? and obj?? (help), %s, and %s on a cell's first line."
            % (", ".join("%" + n for n in lines), ", ".join("%%" + n for n in cells)))


_installed = []


def _ipython_installed():
    """True when IPython can be imported and hosting is on (found once; IPython itself is not imported)."""
    if not _installed:
        import importlib.util

        from pyc import _shell

        try:
            found = _shell.host is not None or (_shell.hosting() and importlib.util.find_spec("IPython") is not None)
        except Exception:
            found = False
        _installed.append(found)
    return _installed[0]


def can_automagic(name):
    """True when a one-line cell may run %name without its % (IPython's automagic; pyc._transform checks
    that no variable shadows it): a line magic or alias that pyc runs, or one of IPython's when IPython is
    installed -- those of its shell once it exists (magics the user registered included), else the ones
    every IPython 8 has, which the kernel lists in _pyc.automagic_names."""
    from pyc import _shell

    if _shell.host is not None and not _shell.host.automagic:
        return False  # %automagic off
    if own_magic(name) is not None:
        return True
    if not _ipython_installed():
        return False
    if _shell.host is not None:
        return _shell.host.find_magic(name, "line") is not None
    import _pyc

    return name in getattr(_pyc, "automagic_names", ())


def line_magic(name, line=""):
    """Runs %name line in the caller's namespace: pyc's own magic, else IPython's."""
    fn = own_magic(name)
    if fn is None:
        # _stack_depth counts from IPython's run_line_magic to the cell's frame, for $name expansion.
        return _ipython_shell("%", name).run_line_magic(name, line, _stack_depth=2)
    return fn(line, sys._getframe(1))


def cell_magic(name, line, body):
    """Runs %%name line + body (the rest of the cell) in the caller's namespace: pyc's own, else IPython's."""
    fn = _CELL.get(name)
    if body is None:
        raise UsageError("%%%%%s must be on the first line of the cell" % name)
    if fn is None:
        # IPython's cells end with a newline (its transformers add one); %%writefile writes it
        return _ipython_shell("%%", name).run_cell_magic(name, line, body if body.endswith("\n") else body + "\n")
    return fn(line, sys._getframe(1), body)


_oldpwd = None


def _unquote(s):
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    return s


def _magic_cd(line, frame):
    """Change the working directory: %cd DIR, %cd - (the previous directory), %cd (home); -q: quiet.
    Prints the new directory.  {expr} and $name are expanded."""
    global _oldpwd
    arg = expand(line.strip(), _merged(frame))
    quiet = False
    if arg == "-q" or arg.startswith("-q "):
        quiet = True
        arg = arg[2:].strip()
    arg = _unquote(arg)
    if arg == "-":
        if _oldpwd is None:
            raise UsageError("%cd -: No previous directory to change to.")
        target = _oldpwd
    elif not arg:
        target = os.path.expanduser("~")
    else:
        target = os.path.expanduser(arg)
    old = os.getcwd()
    os.chdir(target)
    _oldpwd = old
    if not quiet:
        print(os.getcwd())
    return None


def _magic_pwd(line, frame):
    """The current working directory (as the value of the line)."""
    return os.getcwd()


_SECRET_WORDS = ("key", "token", "secret", "password", "passwd")


def _magic_env(line, frame):
    """Environment variables: %env (a dict of all, likely secrets hidden), %env NAME (the value),
    %env NAME=VALUE or %env NAME VALUE (set it; prints 'env: NAME=VALUE').  {expr} and $name are
    expanded."""
    arg = line.strip()
    if not arg:
        env = dict(os.environ)
        for key in env:
            if any(w in key.lower() for w in _SECRET_WORDS):
                env[key] = "<hidden>"
        return env
    arg = expand(arg, _merged(frame))
    sep = "=" if "=" in arg else " "
    bits = arg.split(sep, 1)
    if len(bits) == 1:
        key = bits[0].strip()
        if key in os.environ:
            return os.environ[key]
        raise UsageError("Environment does not have key: %s" % key)
    var, val = bits[0].strip(), bits[1].strip()
    if not var or any(c.isspace() for c in var):
        raise UsageError("refusing to set env var with whitespace: %r" % var)
    os.environ[var] = val
    print("env: %s=%s" % (var, val))
    return None


# The backends that need a GUI event loop, which a kernel in a notebook does not run.
_GUI = ("qt", "qt4", "qt5", "qt6", "tk", "gtk", "gtk3", "gtk4", "wx", "osx", "macosx", "gtkagg", "tkagg", "qtagg",
        "qt5agg", "wxagg", "gtk3agg", "gtk4agg")


def _use_backend(mpl, backend):
    """Makes backend matplotlib's, recorded in its rcParams (not MPLBACKEND, which child processes, unable to
    import pyc, would inherit); pyplot, when imported, switches to it."""
    try:
        current = dict.__getitem__(mpl.rcParams, "backend")
    except Exception:
        current = None
    if not isinstance(current, str) or current.lower() != backend.lower():
        mpl.use(backend)


def _magic_matplotlib(line, frame):
    """Choose how figures appear: %matplotlib inline (the default: PNG images in the output), %matplotlib
    widget (or ipympl; interactive figures through ipywidgets, when the ipympl package is installed),
    %matplotlib notebook (the same as widget, as ipykernel 6 with IPython 8.5 takes it), a non-interactive backend by name (agg, pdf,
    svg, ...: no figure is shown), --list (the choices).  GUI backends (qt, tk, ...) need an event loop that a
    notebook kernel does not run."""
    import importlib.util

    arg = line.strip()
    import matplotlib as mpl

    if arg in ("-l", "--list"):
        print("Available matplotlib backends: %s" % ["inline", "widget", "ipympl", "notebook", "agg", "pdf", "ps",
                                                      "svg", "cairo", "template"])
        return None
    if arg in ("", "inline"):
        _use_backend(mpl, BACKEND)
        return None
    if arg in ("widget", "ipympl", "notebook", "nbagg"):
        if importlib.util.find_spec("ipympl") is None:
            raise UsageError("%%matplotlib %s: interactive figures need the ipympl package, which is not installed "
                             "(pip install ipympl, with ipywidgets); figures stay inline" % arg)
        _use_backend(mpl, "module://ipympl.backend_nbagg")
        return None
    if arg.lower() in _GUI:
        raise UsageError("%%matplotlib %s: a GUI backend needs an event loop, which a notebook kernel does not run; "
                         "use %%matplotlib inline or %%matplotlib widget" % arg)
    from matplotlib import rcsetup

    if arg.lower() not in [b.lower() for b in rcsetup.non_interactive_bk]:
        raise UsageError("%%matplotlib %s: no such backend; %%matplotlib --list names the choices" % arg)
    _use_backend(mpl, arg)
    return None


def _externally_managed():
    """The EXTERNALLY-MANAGED marker (PEP 668) of the interpreter the kernel runs, when it is not a virtual
    environment's: pip refuses to install into such an interpreter."""
    import sysconfig

    if sys.prefix != sys.base_prefix:
        return None
    marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
    return marker if os.path.exists(marker) else None


def _magic_pip(line, frame):
    """Run pip for the kernel's own interpreter (sys.executable -m pip ...), as IPython's %pip does, so that
    what it installs lands where the kernel imports from; then forget the import system's caches, so that a
    new package imports in the next cell without a restart.  {expr} and $name are expanded."""
    import importlib
    import shlex

    args = expand(line.strip(), _merged(frame))
    marker = _externally_managed()
    if marker is not None and args.split()[:1] == ["install"]:
        sys.stderr.write(
            "Note: the kernel runs the system's Python (%s), which is externally managed (PEP 668): pip will "
            "refuse to install into it.  Make a virtual environment and a kernel for it:\n"
            "    python3 -m venv ENV && . ENV/bin/activate && pyc-kernel install --user --name ENV\n"
            "(or install the Debian package, apt install python3-NAME)\n" % sys.executable)
    from pyc import _system, _timetravel

    rc = _system.run("%s -m pip %s" % (shlex.quote(sys.executable), args))
    importlib.invalidate_caches()
    if rc:
        sys.stderr.write("%%pip exited with status %d\n" % rc)
    return None


_SCHEMES = {"nocolor": False, "neutral": True, "linux": True, "lightbg": True}


def _magic_colors(line, frame):
    """%colors SCHEME, as IPython's: NoColor makes tracebacks plain (OpenHands sends `%colors nocolor`
    before its first cell, to read them), Linux, LightBG and Neutral colored (pyc colors them as IPython's
    Linux).  An IPython shell that exists already is told too; none is made for it."""
    from pyc import _shell, _traceback

    scheme = line.strip()
    if not scheme:
        raise UsageError("%colors: you must specify a color scheme: NoColor, Neutral, Linux or LightBG")
    if scheme.lower() not in _SCHEMES:
        raise UsageError("%%colors: unknown color scheme %r: NoColor, Neutral, Linux or LightBG" % scheme)
    _traceback.colors_off = not _SCHEMES[scheme.lower()]
    if _shell.host is not None:
        _shell.host.run_line_magic("colors", scheme)
    return None


def _script_options(words):
    """IPython's options of the script magics, taken off words: (options dict, the program's argv)."""
    opts = {"out": None, "err": None, "proc": None, "bg": False, "raise": True}
    rest = []
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("--out", "--err", "--proc"):
            if i + 1 >= len(words) or not words[i + 1].isidentifier():
                raise UsageError("%s needs a variable name" % w)
            opts[w[2:]] = words[i + 1]
            i += 2
            continue
        if w == "--bg":
            opts["bg"] = True
        elif w == "--no-raise-error":
            opts["raise"] = False
        else:
            rest.append(w)
        i += 1
    return opts, rest


class _Collect:
    """A stream that keeps what is written to it (--out and --err)."""

    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)

    def flush(self):
        pass


def _run_script_magic(argv, line, frame, body):
    """%%script PROGRAM [ARGS] and the named ones (%%bash, %%python3, ...): the cell is the program's script,
    on its stdin, its output streamed into the cell as it comes, as IPython's script magics run it.  Options,
    as IPython's: --out NAME / --err NAME keep the output in a variable instead (a string), --bg runs the
    program in the background (its output discarded, unless --out/--err name a variable, which then holds
    the stream to read), --proc NAME keeps the Popen object; a non-zero exit raises CalledProcessError after
    the output, unless --no-raise-error is given."""
    import shlex
    import subprocess

    opts, words = _script_options(shlex.split(line))
    argv = argv + words
    if not argv:
        raise UsageError("%%script: which program? (%%script bash, %%script python3 -u, ...)")
    script = body if body.endswith("\n") else body + "\n"
    ns = frame.f_globals
    if opts["bg"]:
        return _script_in_background(argv, script, opts, ns)
    sinks = {"stdout": _Collect() if opts["out"] else None, "stderr": _Collect() if opts["err"] else None}
    try:
        rc = _system.run_script(argv, script, sinks["stdout"], sinks["stderr"])
    except FileNotFoundError:
        print("Couldn't find program: %r" % argv[0])
        return None
    for key, name in (("stdout", opts["out"]), ("stderr", opts["err"])):
        if name:
            ns[name] = "".join(sinks[key].parts)
    if rc != 0 and opts["raise"]:
        raise subprocess.CalledProcessError(rc, script)
    return None


def _script_in_background(argv, script, opts, ns):
    import subprocess
    import threading

    pipe = subprocess.PIPE
    try:
        p = subprocess.Popen(argv, stdin=pipe, stdout=pipe if opts["out"] else subprocess.DEVNULL,
                             stderr=pipe if opts["err"] else subprocess.DEVNULL, env=_system._child_env())
    except FileNotFoundError:
        print("Couldn't find program: %r" % argv[0])
        return None

    def feed():
        try:
            p.stdin.write(script.encode("utf-8", "replace"))
            p.stdin.close()
        except OSError:
            pass

    threading.Thread(target=feed, name="pyc-script-stdin", daemon=True).start()
    for key, name in (("stdout", opts["out"]), ("stderr", opts["err"])):
        if name:
            ns[name] = getattr(p, key)
    if opts["proc"]:
        ns[opts["proc"]] = p
    return None


def _script_magic(program):
    """The cell magic %%PROGRAM: %%script PROGRAM."""

    def magic(line, frame, body):
        return _run_script_magic([program], line, frame, body)

    magic.__doc__ = "Run the cell with %s in a subprocess (the same as %%%%script %s)." % (program, program)
    return magic


def _magic_script(line, frame, body):
    return _run_script_magic([], line, frame, body)


_magic_script.__doc__ = _run_script_magic.__doc__

# IPython's aliases of common shell commands (its defaults on Linux): `ls -l` on a line of its own, or
# %ls -l, runs `ls -F --color -l`.  %l in an alias stands for the arguments; else they are appended.
_ALIASES = {
    "cat": "cat", "cp": "cp", "mkdir": "mkdir", "mv": "mv", "rm": "rm", "rmdir": "rmdir",
    "ls": "ls -F --color", "ll": "ls -F -o --color",
    "ldir": "ls -F -o --color %l | grep /$", "lf": "ls -F -o --color %l | grep ^-",
    "lk": "ls -F -o --color %l | grep ^l", "lx": "ls -F -o --color %l | grep ^-..x",
}


def _alias(command):
    def magic(line, frame):
        cmd = command.replace("%l", line) if "%l" in command else (command + " " + line).strip()
        frame.f_globals["_exit_code"] = _system.run(expand(cmd, _merged(frame)))
        return None

    magic.__doc__ = "Alias for `%s` (a shell command; its arguments are expanded as in !cmd)." % command
    return magic


from ._timing import TimeitResult, format_time, _magic_time, _magic_timeit  # noqa: E402 (needs UsageError)

from . import _help, _jupyter  # noqa: E402 (they import this module's errors)

page = _help.page  # obj? and friends, called from the cell as _magics.page (pyc._transform)

_LINE = {
    "cd": _magic_cd,
    "clear": _jupyter.magic_clear,
    "colors": _magic_colors,
    "connect_info": _jupyter.magic_connect_info,
    "env": _magic_env,
    "less": _jupyter.magic_less,
    "man": _jupyter.magic_man,
    "matplotlib": _magic_matplotlib,
    "more": _jupyter.magic_less,
    "pinfo": _help.magic_pinfo,
    "pinfo2": _help.magic_pinfo2,
    "pip": _magic_pip,
    "psearch": _help.magic_psearch,
    "pwd": _magic_pwd,
    "qtconsole": _jupyter.magic_qtconsole,
    "restore": _timetravel.magic_restore,
    "snapshot": _timetravel.magic_snapshot,
    "snapshots": _timetravel.magic_snapshots,
    "time": _magic_time,
    "timeit": _magic_timeit,
}
_LINE.update((name, _alias(cmd)) for name, cmd in _ALIASES.items())

# Cell magics the kernel runs before Python sees the cell (src/kernel: a forked cell, a transaction).
_KERNEL_CELL_MAGICS = ("isolate", "transaction")

# Magics of IPython's that pyc stands in for when IPython is not installed (IPython's own run otherwise).
_WITHOUT_IPYTHON = {"lsmagic": _help.magic_lsmagic, "magic": _help.magic_magic, "quickref": _help.magic_quickref}

_CELL = {"time": _magic_time, "timeit": _magic_timeit, "script": _magic_script}
_CELL.update((name, _script_magic(name)) for name in ("bash", "sh", "perl", "ruby", "python", "python2", "python3",
                                                       "pypy"))
