"""%time, %%time, %timeit and %%timeit, as IPython's: the user's code parsed with the cell's file name and line
numbers (so that its tracebacks show the cell's lines), run in the cell's namespace, and timed the way
IPython times it (the same loop counts, the same layout of the report, the same TimeitResult for -o).
pyc._magics dispatches to these (line_magic, cell_magic).
"""

import os



def _usage_error(message):
    """pyc._magics.UsageError(message), imported when raised (pyc._magics imports this module)."""
    from ._magics import UsageError

    return UsageError(message)


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
            raise _usage_error("Can't use statement directly after '%%time'!")
        src = transform_cell(body)
        first, col = frame.f_lineno + 1, 0
    else:
        src = transform_cell(line)
        first, col = frame.f_lineno, _column_in_line(frame, line)
    g, loc = frame.f_globals, frame.f_locals  # the same dict at a cell's top level
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
                raise _usage_error("%%timeit: option -%s needs a number" % flag)
            try:
                opts[flag] = int(tok[0])
            except ValueError:
                raise _usage_error("%%timeit: option -%s needs a number, not %s" % (flag, shlex.quote(tok[0])))
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
        raise _usage_error("%timeit: -r must be at least 1 and -n at least 0")
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

    g, loc = frame.f_globals, frame.f_locals  # the same dict at a cell's top level
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
