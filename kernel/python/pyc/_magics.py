"""Runtime of the IPython-style lines that pyc._transform rewrites into calls of this module.

  !cmd, x = !cmd, !!cmd    system(cmd), getoutput(cmd)   (a shell command; its output, or its lines)
  obj?, obj??, ?obj        page(expr, level)             (pyc._inspect's text as a "page" payload)
  %name args, x = %name    line_magic(name, args)        (%cd %colors %env %matplotlib %pip %pwd %time %timeit)
  %%name line              cell_magic(name, line, body)  (%%bash %%sh %%time %%timeit; on a cell's first line)

The helpers run in the cell's frame's namespace (found with sys._getframe, so the generated code stays
short).  As in IPython, `!`, %cd and %env expand {expr} and $name from the namespace (all or nothing: if one
fails, the command is left as typed; $$ is a literal $); %time and %timeit do not.  Any other magic runs in
IPython's magic machinery (pyc._ipython's shell), when IPython is installed; without it they raise
UnknownMagic, whose message lists what pyc supports.  Wrong arguments raise UsageError.
"""

import os
import sys

from pyc import _system, _timetravel

LINE_MAGICS = ("cd", "colors", "env", "matplotlib", "pip", "pwd", "restore", "snapshot", "snapshots", "time",
               "timeit")
CELL_MAGICS = ("bash", "isolate", "sh", "time", "timeit", "transaction")

BACKEND = _system.BACKEND

SUPPORTED = (
    "pyc supports by itself: !cmd, x = !cmd, obj? and obj?? (help), "
    "%cd, %colors, %env, %matplotlib inline, %pip, %pwd, %time, %timeit, %snapshot, %snapshots, %restore, "
    "and %%bash, %%sh, %%time, %%timeit, %%isolate, %%transaction on a cell's first line."
)


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


# ---- help ------------------------------------------------------------------------------------------------

HELP = """pyc -- a Jupyter kernel for Python, written in C (no IPython inside).

Besides Python, a cell accepts these IPython-style lines:
  !cmd               run cmd with the shell; {expr} and $name are expanded
  x = !cmd           the output's lines, as a list (also !!cmd)
  obj?   obj??       help on obj: signature and docstring (?) or source (??)
  %cd [dir]          change the working directory (-: the previous one; none: home)
  %pwd               the working directory
  %env [NAME[=VALUE]]  list, read or set environment variables
  %matplotlib inline figures appear as PNG images (the default)
  %time stmt         run stmt once and print its CPU and wall times
  %timeit stmt       time stmt over many loops (-n N loops, -r R runs, -q quiet, -o return the result)
  %%time, %%timeit   the same for the whole cell, on its first line (%%timeit: setup code on that line)
Rich output: display(obj), pyc.update_display(obj, display_id=...), pyc.clear_output().
"""


def page(target, detail_level=0):
    """obj? / obj??: publishes pyc._inspect's text about target as a "page" payload of the execute_reply;
    prints `Object `target` not found.` when target does not evaluate (without calls)."""
    frame = sys._getframe(1)
    target = target.strip()
    if not target:
        text = HELP
    elif target.startswith("%"):
        name = target.lstrip("%")
        fn = _LINE.get(name) if not target.startswith("%%") else _CELL.get(name)
        if fn is None:
            print("Object `%s` not found." % target)
            return None
        import inspect as std

        text = "%s\n\n%s\n" % (target, std.cleandoc(fn.__doc__ or ""))
    else:
        from . import _inspect, _source

        try:
            obj = _source.guarded_eval(target, _merged(frame), static=True)
        except Exception:
            print("Object `%s` not found." % target)
            return None
        text = _inspect.describe(obj, target, detail_level)
    import _pyc

    _pyc.add_payload({"source": "page", "data": {"text/plain": text}, "start": 0})
    return None


# ---- magics ----------------------------------------------------------------------------------------------


def _ipython_shell(kind, name):
    """The IPython shell that runs the magics pyc does not implement; UnknownMagic when IPython is not
    installed."""
    from pyc import _shell

    shell = _shell.get_ipython()
    if shell is None:
        raise UnknownMagic("%s%s is an IPython magic, and IPython is not installed (python3-ipython provides "
                           "it; PYC_IPYTHON=0 also turns it off). %s" % (kind, name, SUPPORTED))
    return shell


def line_magic(name, line=""):
    """Runs %name line in the caller's namespace: pyc's own magic, else IPython's."""
    fn = _LINE.get(name)
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


def _parse_user(src, frame, first_line, col=0):
    """Parses user code that lives on lines first_line.. of the cell (and at column col of its first line),
    with the cell's file name, so that its tracebacks show the cell's lines."""
    import ast

    tree = ast.parse(src, frame.f_code.co_filename, "exec")
    if col:
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) == 1:
                node.col_offset += col
                if getattr(node, "end_lineno", None) == 1:
                    node.end_col_offset += col
    if first_line > 1:
        ast.increment_lineno(tree, first_line - 1)
    return tree


def _column_in_line(frame, text):
    """The UTF-8 column at which text starts in the cell's current line, when linecache has the cell."""
    if not text:
        return 0
    try:
        import linecache

        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    except Exception:
        return 0
    k = line.find(text)
    return len(line[:k].encode("utf-8")) if k >= 0 else 0


def format_time(timespan, precision=3):
    """A duration as IPython prints it: '1.23 ms', '456 ns', '1min 3s'."""
    import math

    if timespan >= 60.0:
        parts = [("d", 60 * 60 * 24), ("h", 60 * 60), ("min", 60), ("s", 1)]
        out = []
        leftover = timespan
        for suffix, length in parts:
            value = int(leftover / length)
            if value > 0:
                leftover = leftover % length
                out.append("%s%s" % (value, suffix))
            if leftover < 1:
                break
        return " ".join(out)
    units = ["s", "ms", "\xb5s", "ns"]
    scaling = [1, 1e3, 1e6, 1e9]
    if timespan > 0.0:
        order = min(-int(math.floor(math.log10(timespan)) // 3), 3)
    else:
        order = 3
    text = "%.*g" % (precision, timespan * scaling[order])
    if "e" in text and order > 0:
        # 999.9996 ns rounds to 1e+03 ns (as in IPython): say 1 µs
        order -= 1
        text = "%.*g" % (precision, timespan * scaling[order])
    return "%s %s" % (text, units[order])


def _run(code, g, loc, mode):
    if mode == "eval":
        return eval(code, g, loc) if loc is not g else eval(code, g)
    if loc is not g:
        exec(code, g, loc)
    else:
        exec(code, g)
    return None


def _cpu_times():
    """(user, system) CPU seconds of the process, at getrusage's microsecond resolution when available."""
    try:
        import resource

        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime, r.ru_stime
    except Exception:
        t = os.times()
        return t.user, t.system


def _magic_time(line, frame, body=None):
    """Time the execution of a statement or expression (%time stmt) or of the cell (%%time).

    Prints 'CPU times: user ..., sys: ..., total: ...' and 'Wall time: ...' after running it once, and
    returns the value of the expression (for %%time, of the cell's last line when it is an expression)."""
    import ast
    import time

    from ._transform import transform_cell

    if body is not None:
        if line.strip():
            raise UsageError("Can't use statement directly after '%%time'!")
        src = transform_cell(body)
        first, col = frame.f_lineno + 1, 0
    else:
        src = transform_cell(line)
        first, col = frame.f_lineno, _column_in_line(frame, line)
    g, loc = _namespaces(frame)
    t0 = time.perf_counter()
    tree = _parse_user(src, frame, first, col)
    tp = time.perf_counter() - t0
    last = None
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
        mode = "eval"
        tree = ast.Expression(tree.body[0].value)
    else:
        mode = "exec"
        if len(tree.body) > 1 and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body[-1].value)
            tree.body = tree.body[:-1]
    filename = frame.f_code.co_filename
    t0 = time.perf_counter()
    code = compile(tree, filename, mode)
    last_code = compile(last, filename, "eval") if last is not None else None
    tc = time.perf_counter() - t0

    wall0 = time.perf_counter()
    cpu0 = _cpu_times()
    out = _run(code, g, loc, mode)
    if last_code is not None:
        out = _run(last_code, g, loc, "eval")
    cpu1 = _cpu_times()
    wall = time.perf_counter() - wall0
    user = cpu1[0] - cpu0[0]
    sys_ = cpu1[1] - cpu0[1]
    print(
        "CPU times: user %s, sys: %s, total: %s" % (format_time(user), format_time(sys_), format_time(user + sys_))
    )
    print("Wall time: %s" % format_time(wall))
    if tc > 0.1:
        print("Compiler : %s" % format_time(tc))
    if tp > 0.1:
        print("Parser   : %s" % format_time(tp))
    return out


class TimeitResult:
    """What %timeit -o returns: loops, repeat, best, worst, all_runs (seconds per run), compile_time,
    timings (seconds per loop), average and stdev."""

    def __init__(self, loops, repeat, best, worst, all_runs, compile_time, precision):
        self.loops = loops
        self.repeat = repeat
        self.best = best
        self.worst = worst
        self.all_runs = all_runs
        self.compile_time = compile_time
        self._precision = precision
        self.timings = [dt / self.loops for dt in all_runs]

    @property
    def average(self):
        import math

        return math.fsum(self.timings) / len(self.timings)

    @property
    def stdev(self):
        import math

        mean = self.average
        return (math.fsum([(x - mean) ** 2 for x in self.timings]) / len(self.timings)) ** 0.5

    def __str__(self):
        return "%s \xb1 %s per loop (mean \xb1 std. dev. of %d run%s, %s loop%s each)" % (
            format_time(self.average, self._precision),
            format_time(self.stdev, self._precision),
            self.repeat,
            "" if self.repeat == 1 else "s",
            "{:,}".format(self.loops),
            "" if self.loops == 1 else "s",
        )

    def __repr__(self):
        return "<TimeitResult : %s>" % self


_TIMEIT_TEMPLATE = """\
def inner(_it, _timer):
    setup
    _t0 = _timer()
    for _i in _it:
        stmt
    _t1 = _timer()
    return _t1 - _t0
"""


def _timeit_options(line):
    """Parses %timeit's options (-n N -r R -p P -q -o -t -c, glued or not) off the front of line."""
    import shlex

    opts = {}
    rest = line.lstrip()
    while rest.startswith("-") and len(rest) > 1 and rest[1] in "nrpqotc":
        flag = rest[1]
        rest = rest[2:]
        if flag in "nrp":
            rest = rest.lstrip()
            tok = rest.split(None, 1)
            if not tok:
                raise UsageError("%%timeit: option -%s needs a number" % flag)
            try:
                opts[flag] = int(tok[0])
            except ValueError:
                raise UsageError("%%timeit: option -%s needs a number, not %s" % (flag, shlex.quote(tok[0])))
            rest = tok[1] if len(tok) > 1 else ""
        else:
            opts[flag] = True
            if rest[:1] not in ("", " ", "\t", "-"):
                # several flags glued together: -qo
                rest = "-" + rest
        rest = rest.lstrip()
    return opts, rest


def _magic_timeit(line, frame, body=None):
    """Time a statement over many loops (%timeit [-n N] [-r R] [-p P] [-q] [-o] stmt), or the cell
    (%%timeit [options] [setup]: the line holds the setup code, the cell the statement).

    Without -n, the number of loops is the first power of 10 for which one run takes at least 0.2 s; -r
    sets the number of runs (7).  Prints 'mean ± std per loop (mean ± std. dev. of R runs, N loops each)';
    -q prints nothing, -o returns a TimeitResult."""
    import ast
    import time
    import timeit

    from ._transform import transform_cell

    opts, rest = _timeit_options(line)
    if body is None:
        setup_src, stmt_src = "pass", transform_cell(rest)
        stmt_first, setup_first = frame.f_lineno, frame.f_lineno
    else:
        setup_src, stmt_src = transform_cell(rest) or "pass", transform_cell(body)
        stmt_first, setup_first = frame.f_lineno + 1, frame.f_lineno
    if not stmt_src.strip():
        return None
    number = opts.get("n", 0)
    repeat = opts.get("r", 7)
    precision = opts.get("p", 3)
    if repeat < 1 or number < 0:
        raise UsageError("%timeit: -r must be at least 1 and -n at least 0")
    setup = _parse_user(setup_src, frame, setup_first)
    stmt = _parse_user(stmt_src, frame, stmt_first)
    filename = frame.f_code.co_filename
    compile(setup, filename, "exec")
    compile(stmt, filename, "exec")
    template = ast.parse(_TIMEIT_TEMPLATE)
    inner = template.body[0]
    inner.body[0:1] = setup.body or [ast.Pass()]
    loop = next(n for n in inner.body if isinstance(n, ast.For))
    loop.body = stmt.body or [ast.Pass()]
    ast.fix_missing_locations(template)
    t0 = time.perf_counter()
    code = compile(template, filename, "exec")
    tc = time.perf_counter() - t0

    g, loc = _namespaces(frame)
    if loc is not g:
        g = dict(g)
        g.update(loc)
    ns = {}
    exec(code, g, ns)
    timer = timeit.Timer(timer=time.perf_counter)
    timer.inner = ns["inner"]
    if number == 0:
        for index in range(10):
            number = 10**index
            if timer.timeit(number) >= 0.2:
                break
    all_runs = timer.repeat(repeat, number)
    best = min(all_runs) / number
    worst = max(all_runs) / number
    result = TimeitResult(number, repeat, best, worst, all_runs, tc, precision)
    if not opts.get("q"):
        if worst > 4 * best and best > 0 and worst > 1e-6:
            print(
                "The slowest run took %0.2f times longer than the fastest. This could mean that an "
                "intermediate result is being cached." % (worst / best)
            )
        print(result)
        if tc > 0.1:
            print("Compiler time: %.2f s" % tc)
    return result if opts.get("o") else None


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


def _magic_matplotlib(line, frame):
    """Figures appear inline as PNG images: %matplotlib inline (the only choice; also the default)."""
    arg = line.strip()
    if arg not in ("", "inline"):
        raise UsageError(
            "%%matplotlib %s: pyc supports only the inline backend (%%matplotlib inline)" % arg
        )
    # matplotlib (not pyplot) is imported to record the choice in its rcParams: setting MPLBACKEND instead
    # would pass it on to child processes, which cannot import pyc
    import matplotlib as mpl

    try:
        current = dict.__getitem__(mpl.rcParams, "backend")
    except Exception:
        current = None
    if not isinstance(current, str) or current.lower() != BACKEND:
        mpl.use(BACKEND)
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


def _script_magic(name, program):
    """%%bash and %%sh: the cell is the program's script, given on its stdin, its output streamed as it
    comes, as IPython's script magics do.  As in IPython 8, a non-zero exit raises CalledProcessError
    (after the output), unless --no-raise-error is given.  IPython's other options (--bg, --out, --err,
    --proc) are IPython's: the cell then runs there, and without IPython they are a UsageError."""

    def magic(line, frame, body):
        import shlex
        from subprocess import CalledProcessError

        args = shlex.split(line)
        options = [a for a in args if a != "--no-raise-error"]
        script = body if body.endswith("\n") else body + "\n"
        if options:
            from pyc import _shell

            if _shell.get_ipython() is None:
                raise UsageError("%%%%%s: pyc supports only --no-raise-error without IPython, not %s"
                                 % (name, " ".join(options)))
            return _ipython_shell("%%", name).run_cell_magic(name, line, script)
        rc = _system.run_script([program], script)
        if rc != 0 and "--no-raise-error" not in args:
            raise CalledProcessError(rc, script)
        return None

    return magic


_LINE = {
    "cd": _magic_cd,
    "colors": _magic_colors,
    "env": _magic_env,
    "matplotlib": _magic_matplotlib,
    "pip": _magic_pip,
    "pwd": _magic_pwd,
    "restore": _timetravel.magic_restore,
    "snapshot": _timetravel.magic_snapshot,
    "snapshots": _timetravel.magic_snapshots,
    "time": _magic_time,
    "timeit": _magic_timeit,
}
_CELL = {"time": _magic_time, "timeit": _magic_timeit, "bash": _script_magic("bash", "bash"),
         "sh": _script_magic("sh", "sh")}
