"""The traceback of a cell's error, laid out and colored as IPython 8 lays it out in a notebook.

format(etype, value, tb, cells, color) returns the `traceback` list of an `error` message: a rule and the
exception's name, then one entry per frame -- "Cell In [N], line L" for a frame of cell N, "File path:L, in
func(args)" for others -- with two lines of context before and after the line that was running (marked
with an arrow), then the exception; chained exceptions (__cause__, __context__) come first, joined by
Python's own sentences.  Colors are ANSI escapes, as IPython's "Linux" scheme uses them; color=False gives
the same text without them.  The source lines themselves are not syntax-highlighted (IPython uses
pygments for that; pyc does not import it).

cells maps a cell's file name (given by the kernel: /tmp/pyc_PID/HASH.py) to its execution count.
"""

import linecache
import traceback as _tb

RULE = "-" * 75
CONTEXT = 2

# IPython's "Linux" color scheme (IPython/core/excolors.py), the one ipykernel uses.
_COLORS = {
    "exc": "\x1b[0;31m",        # exception name, rule
    "file": "\x1b[0;32m",       # file name, "Cell In [N]"
    "func": "\x1b[0;36m",       # function name
    "args": "\x1b[0;34m",       # its arguments
    "arrow": "\x1b[0;32m",      # ----> on the running line
    "lineno": "\x1b[1;32m",     # other line numbers
    "normal": "\x1b[0m",
}
_NO_COLORS = dict.fromkeys(_COLORS, "")

# True after `%colors nocolor` (pyc._magics): tracebacks are plain whatever the request asks, until another
# scheme is chosen.
colors_off = False


def _cell_label(filename, lineno, cells, c):
    count = cells.get(filename)
    if count is None:
        return None
    where = "In [%s]" % count if count else "In [ ]"
    return "Cell %s%s, line %s%s" % (c["file"], where, lineno, c["normal"])


def _arguments(frame):
    import inspect

    try:
        args, varargs, varkw, values = inspect.getargvalues(frame)
        return inspect.formatargvalues(args, varargs, varkw, values, formatvalue=lambda v: "")
    except Exception:
        return "(...)"


def _context(filename, lineno, globals_, c):
    """The lines around lineno, numbered, the running one marked."""
    linecache.checkcache(filename)
    first = max(1, lineno - CONTEXT)
    out = []
    for n in range(first, lineno + CONTEXT + 1):
        line = linecache.getline(filename, n, globals_)
        if not line:
            if n > lineno:
                break
            continue
        line = line.rstrip("\n").rstrip()
        if n != lineno and not line.strip():
            continue
        if n == lineno:
            num = "-" * (5 - len(str(n))) + "> " + str(n)
            out.append("%s%s%s %s" % (c["arrow"], num, c["normal"], line))
        else:
            out.append("%s%7s%s %s" % (c["lineno"], n, c["normal"], line))
    return out


def _frames(tb, cells, c):
    entries = []
    while tb is not None:
        frame, lineno = tb.tb_frame, tb.tb_lineno
        code = frame.f_code
        head = _cell_label(code.co_filename, lineno, cells, c)
        if head is None:
            head = "File %s%s:%s%s" % (c["file"], code.co_filename, lineno, c["normal"])
        if code.co_name != "<module>":
            name = getattr(code, "co_qualname", code.co_name)
            head += ", in %s%s%s%s%s" % (c["func"], name, c["args"], _arguments(frame), c["normal"])
        lines = _context(code.co_filename, lineno, frame.f_globals, c)
        entries.append("\n".join([head] + lines) + "\n")
        tb = tb.tb_next
    return entries


def _only(etype, value):
    """Python's last lines of a traceback, with the exception's bare name as IPython shows it."""
    lines = [line.rstrip("\n") for line in _tb.format_exception_only(etype, value)]
    module = getattr(etype, "__module__", None)
    qualified = getattr(etype, "__qualname__", etype.__name__)
    if module not in (None, "builtins", "__main__"):
        qualified = module + "." + qualified
    for i, line in enumerate(lines):
        if line == qualified or line.startswith(qualified + ":"):
            lines[i] = etype.__name__ + line[len(qualified):]
            break
    return lines


def _exception_lines(etype, value, cells, c):
    """The last entry: "Name: message" (for a SyntaxError in a cell, the line and the caret first)."""
    if isinstance(value, SyntaxError) and value.text is None and value.filename in cells and value.lineno:
        # An error of the compiler (not the parser) on a cell compiled from its AST carries no text: the
        # cell's line, from linecache, as IPython shows it.
        import linecache

        value.text = linecache.getline(value.filename, value.lineno) or None
    lines = _only(etype, value)
    if isinstance(value, SyntaxError) and value.filename in cells and lines:
        # Python's first line is '  File "/tmp/pyc_PID/HASH.py", line L'; IPython shows the cell's label.
        lines[0] = "  " + _cell_label(value.filename, value.lineno, cells, c)
    for i, line in enumerate(lines):
        if line.startswith(etype.__name__):
            name, sep, msg = line.partition(":")
            lines[i] = "%s%s%s%s%s" % (c["exc"], name, c["normal"], sep, msg)
            break
    return ["\n".join(lines)]


def _one(etype, value, tb, cells, c):
    name = etype.__name__
    head = "%s%s%s" % (c["exc"], RULE, c["normal"])
    title = "%s%s%s%s%s" % (c["exc"], name, c["normal"], " " * max(1, 75 - len(name) - 33),
                            "Traceback (most recent call last)")
    if isinstance(value, SyntaxError) and tb is None:
        return _exception_lines(etype, value, cells, c)
    return [head, title] + _frames(tb, cells, c) + _exception_lines(etype, value, cells, c)


def format(etype, value, tb, cells, color=True):
    """The traceback entries of an error, for the `traceback` field of an error message."""
    c = _COLORS if color and not colors_off else _NO_COLORS
    chain = []
    seen = set()
    while value is not None and id(value) not in seen:
        seen.add(id(value))
        chain.append(value)
        if value.__cause__ is not None:
            link, value = "cause", value.__cause__
        elif value.__context__ is not None and not value.__suppress_context__:
            link, value = "context", value.__context__
        else:
            break
        chain.append(link)
    if not chain:
        return _one(etype, value, tb, cells, c)
    out = []
    for item in reversed(chain):
        if item == "cause":
            out.append("\nThe above exception was the direct cause of the following exception:\n")
        elif item == "context":
            out.append("\nDuring handling of the above exception, another exception occurred:\n")
        else:
            exc_tb = tb if item is chain[0] else item.__traceback__
            out.extend(_one(type(item), item, exc_tb, cells, c))
    return out
