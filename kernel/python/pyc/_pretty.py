"""The text/plain form of results and displays, laid out as IPython lays it out, without IPython.

pretty(obj) gives the same text as IPython.lib.pretty.pretty(obj) with ipykernel's defaults (79 columns, at
most 1000 items of a container, then "..."), so that a notebook shows the same result whichever kernel ran
it, and a million-item list is a few kilobytes of text instead of megabytes.  tests/python/test_pretty.py
compares the two on a corpus of values.

The layout is the group-and-breakable algorithm of Ruby's prettyprint (Wadler's "prettier printer"), as
IPython implements it: text accumulates in a buffer; each breakable separator belongs to the innermost open
group; when the buffered line would pass max_width, the outermost group that still has breakables is broken
(every one of its breakables becomes a newline plus that breakable's indentation), and so on inwards until
the line fits.  IPython's choices are kept where they decide the output, even where they look accidental:
the queue of a depth removes the group at the position counted from the other end (GroupQueue.deq), and a
flush adds the width it wrote to the width already written.

Objects choose their own layout with _repr_pretty_(self, p, cycle), where p is a Printer with IPython's
methods (text, breakable, break_, begin_group, end_group, group, indent, pretty) and cycle says that obj is
already being printed further out.  Containers whose class keeps the builtin __repr__ are laid out here;
any class with its own __repr__ keeps it (its newlines become line breaks).
"""

import collections
import datetime
import os
import re
import types
from contextlib import contextmanager

__all__ = ["pretty", "Printer", "for_type", "for_type_by_name"]

MAX_WIDTH = 79
MAX_SEQ_LENGTH = 1000


# ---- layout ------------------------------------------------------------------------------------------------


class _Group:
    __slots__ = ("depth", "breakables", "want_break")

    def __init__(self, depth):
        self.depth = depth
        self.breakables = collections.deque()
        self.want_break = False


class _Text:
    __slots__ = ("parts", "width")

    def __init__(self):
        self.parts = []
        self.width = 0

    def emit(self, p, column):
        p._out.extend(self.parts)
        return column + self.width


class _Breakable:
    __slots__ = ("sep", "width", "indentation", "group")

    def __init__(self, sep, p):
        self.sep = sep
        self.width = len(sep)
        self.indentation = p.indentation
        self.group = p._stack[-1]
        self.group.breakables.append(self)

    def emit(self, p, column):
        group = self.group
        group.breakables.popleft()
        if group.want_break:
            p._out.append(p.newline + " " * self.indentation)
            return self.indentation
        if not group.breakables:
            p._unqueue(group)
        p._out.append(self.sep)
        return column + self.width


class Printer:
    """Lays out text in groups that break at their breakables when a line would pass max_width."""

    def __init__(self, max_width=MAX_WIDTH, max_seq_length=MAX_SEQ_LENGTH, newline="\n", verbose=False):
        self.max_width = max_width
        self.max_seq_length = max_seq_length
        self.newline = newline
        self.verbose = verbose
        self.indentation = 0
        self.output_width = 0      # columns written on the current line
        self.buffer_width = 0      # columns waiting in the buffer
        self._out = []
        self._buffer = collections.deque()
        root = _Group(0)
        self._stack = [root]       # open groups, innermost last
        self._levels = [[root]]    # groups that may still be broken, by depth
        self._printing = []        # ids of the objects being printed, for cycles

    # -- the queue of groups, by depth

    def _enqueue(self, group):
        while len(self._levels) <= group.depth:
            self._levels.append([])
        self._levels[group.depth].append(group)

    def _unqueue(self, group):
        try:
            self._levels[group.depth].remove(group)
        except ValueError:
            pass

    def _next_to_break(self):
        """The outermost group that has breakables, marked to break; shallower groups without breakables are
        marked too and dropped from the queue."""
        for level in self._levels:
            for i, group in enumerate(reversed(level)):
                if group.breakables:
                    del level[i]          # IPython's index: counted from the front
                    group.want_break = True
                    return group
            for group in level:
                group.want_break = True
            del level[:]
        return None

    def _emit_group(self, group):
        while group.breakables:
            item = self._buffer.popleft()
            self.output_width = item.emit(self, self.output_width)
            self.buffer_width -= item.width
        while self._buffer and isinstance(self._buffer[0], _Text):
            item = self._buffer.popleft()
            self.output_width = item.emit(self, self.output_width)
            self.buffer_width -= item.width

    def _fit(self):
        while self.max_width < self.output_width + self.buffer_width:
            group = self._next_to_break()
            if group is None:
                return
            self._emit_group(group)

    def _newline(self):
        self._out.append(self.newline + " " * self.indentation)
        self.output_width = self.indentation
        self.buffer_width = 0

    # -- IPython's printer interface

    def text(self, obj):
        """Adds literal text."""
        width = len(obj)
        if self._buffer:
            last = self._buffer[-1]
            if not isinstance(last, _Text):
                last = _Text()
                self._buffer.append(last)
            last.parts.append(obj)
            last.width += width
            self.buffer_width += width
            self._fit()
        else:
            self._out.append(obj)
            self.output_width += width

    def breakable(self, sep=" "):
        """Adds sep, or a line break if the innermost group is broken."""
        if self._stack[-1].want_break:
            self.flush()
            self._newline()
        else:
            self._buffer.append(_Breakable(sep, self))
            self.buffer_width += len(sep)
            self._fit()

    def break_(self):
        """Adds a line break that is always taken, keeping the indentation."""
        group = self._next_to_break()
        if group is not None:
            self._emit_group(group)
        self.flush()
        self._newline()

    def begin_group(self, indent=0, open=""):
        if open:
            self.text(open)
        group = _Group(self._stack[-1].depth + 1)
        self._stack.append(group)
        self._enqueue(group)
        self.indentation += indent

    def end_group(self, dedent=0, close=""):
        self.indentation -= dedent
        group = self._stack.pop()
        if not group.breakables:
            self._unqueue(group)
        if close:
            self.text(close)

    @contextmanager
    def group(self, indent=0, open="", close=""):
        self.begin_group(indent, open)
        try:
            yield
        finally:
            self.end_group(indent, close)

    @contextmanager
    def indent(self, indent):
        self.indentation += indent
        try:
            yield
        finally:
            self.indentation -= indent

    def flush(self):
        for item in self._buffer:
            self.output_width += item.emit(self, self.output_width)
        self._buffer.clear()
        self.buffer_width = 0

    def _enumerate(self, seq):
        """enumerate(seq), stopping with ", ..." after max_seq_length items."""
        for i, x in enumerate(seq):
            if self.max_seq_length and i >= self.max_seq_length:
                self.text(",")
                self.breakable()
                self.text("...")
                return
            yield i, x

    def pretty(self, obj):
        """Lays out obj: a printer registered for its class or a base, its _repr_pretty_, or its repr."""
        key = id(obj)
        cycle = key in self._printing
        self._printing.append(key)
        self.begin_group()
        try:
            if key in _SINGLETONS:
                return _repr(obj, self, cycle)
            cls = _getattr(obj, "__class__", None) or type(obj)
            for base in _mro(cls):
                printer = _printer_for(base)
                if printer is not None:
                    return printer(obj, self, cycle)
                if "_repr_pretty_" in base.__dict__:
                    meth = base._repr_pretty_
                    if callable(meth):
                        return meth(obj, self, cycle)
                if base is not object and callable(base.__dict__.get("__repr__")):
                    return _repr(obj, self, cycle)
            return _default(obj, self, cycle)
        finally:
            self.end_group()
            self._printing.pop()

    def getvalue(self):
        return "".join(self._out)


def pretty(obj, max_width=MAX_WIDTH, max_seq_length=MAX_SEQ_LENGTH):
    """The text/plain of obj."""
    p = Printer(max_width, max_seq_length)
    p.pretty(obj)
    p.flush()
    return p.getvalue()


# ---- printers of types -------------------------------------------------------------------------------------


def _getattr(obj, name, default=None):
    try:
        return getattr(obj, name, default)
    except Exception:
        return default


def _mro(cls):
    mro = _getattr(cls, "__mro__", None)
    return mro if isinstance(mro, tuple) else (cls,)


def _repr(obj, p, cycle):
    """The object's own repr; its newlines become forced line breaks."""
    with p.group():
        lines = repr(obj).splitlines()
        if len(lines) > 2 and p.indentation == 0:
            # At the left margin, once the first break is taken nothing is left buffered and no group has a
            # breakable: the second break (as the loop below takes it, and IPython's) only marks every group
            # still queued broken, and each further one is a bare newline.  So the rest is added in one piece:
            # the same layout as the loop, without its two calls a line (a 10,000-row DataFrame's repr: 9 ms
            # of the 200 the repr takes).
            p.text(lines[0])
            p.break_()
            p._next_to_break()
            p._out.append(p.newline.join(lines[1:]))
            p.output_width = len(lines[-1])
            return
        for i, line in enumerate(lines):
            if i:
                p.break_()
            p.text(line)


def _default(obj, p, cycle):
    """<module.Class at 0x...> for objects that keep object.__repr__."""
    cls = _getattr(obj, "__class__", None) or type(obj)
    if _getattr(cls, "__repr__", None) is not object.__repr__:
        return _repr(obj, p, cycle)
    p.begin_group(1, "<")
    p.pretty(cls)
    p.text(" at 0x%x" % id(obj))
    if cycle:
        p.text(" ...")
    p.end_group(1, ">")


def _items(open, close, one_tuple=False):
    def lay_out(obj, p, cycle):
        if cycle:
            return p.text(open + "..." + close)
        p.begin_group(len(open), open)
        for i, x in p._enumerate(obj):
            if i:
                p.text(",")
                p.breakable()
            p.pretty(x)
        if one_tuple and len(obj) == 1:
            p.text(",")
        p.end_group(len(open), close)
    return lay_out


def _sorted(items):
    items = list(items)
    for key in (None, str):
        try:
            return sorted(items, key=key)
        except Exception:
            pass
    return items


def _set(open, close):
    def lay_out(obj, p, cycle):
        if cycle:
            return p.text(open + "..." + close)
        if not obj:
            return p.text(type(obj).__name__ + "()")
        p.begin_group(len(open), open)
        items = obj if p.max_seq_length and len(obj) >= p.max_seq_length else _sorted(obj)
        for i, x in p._enumerate(items):
            if i:
                p.text(",")
                p.breakable()
            p.pretty(x)
        p.end_group(len(open), close)
    return lay_out


def _mapping(open, close):
    def lay_out(obj, p, cycle):
        if cycle:
            return p.text("{...}")
        p.begin_group(len(open), open)
        for i, key in p._enumerate(obj.keys()):
            if i:
                p.text(",")
                p.breakable()
            p.pretty(key)
            p.text(": ")
            p.pretty(obj[key])
        p.end_group(len(open), close)
    return lay_out


class _Call:
    """name(arg, ..., key=value) laid out as a call."""

    def __init__(self, name, *args, **kwargs):
        self.name, self.args, self.kwargs = name, args, kwargs

    def _repr_pretty_(self, p, cycle):
        prefix = self.name + "("
        with p.group(len(prefix), prefix, ")"):
            items = [(None, a) for a in self.args] + list(self.kwargs.items())
            for i, (name, value) in enumerate(items):
                if i:
                    p.text(",")
                    p.breakable()
                if name is None:
                    p.pretty(value)
                else:
                    with p.group(len(name) + 1, name + "="):
                        p.pretty(value)


class _Raw:
    """Text laid out as it is."""

    def __init__(self, text):
        self.text = text

    def _repr_pretty_(self, p, cycle):
        p.text(self.text)


def _call_of(build):
    """A printer that lays out obj as Name(*args, **kwargs) for (args, kwargs) = build(obj), or Name(...) in a
    cycle."""
    def lay_out(obj, p, cycle):
        name = type(obj).__name__
        if cycle:
            return p.pretty(_Call(name, _Raw("...")))
        args, kwargs = build(obj)
        p.pretty(_Call(name, *args, **kwargs))
    return lay_out


def _type(obj, p, cycle):
    # A metaclass with its own __repr__ keeps it.
    if [m for m in _mro(type(obj)) if "__repr__" in vars(m)][:1] != [type]:
        return _repr(obj, p, cycle)
    mod = _getattr(obj, "__module__", None)
    name = _getattr(obj, "__qualname__", None)
    if not isinstance(name, str):
        name = _getattr(obj, "__name__", None)
        if not isinstance(name, str):
            name = "<unknown type>"
    p.text(name if mod in (None, "__builtin__", "builtins", "exceptions") else mod + "." + name)


def _function(obj, p, cycle):
    name = _getattr(obj, "__qualname__", obj.__name__)
    mod = obj.__module__
    if mod and mod not in ("__builtin__", "builtins", "exceptions"):
        name = mod + "." + name
    try:
        import inspect
        name += str(inspect.signature(obj))
    except (ValueError, TypeError):
        pass
    p.text("<function %s>" % name)


def _exception(obj, p, cycle):
    cls = obj.__class__
    name = getattr(cls, "__qualname__", cls.__name__)
    if cls.__module__ not in ("exceptions", "builtins"):
        name = "%s.%s" % (cls.__module__, name)
    p.pretty(_Call(name, *getattr(obj, "args", ())))


def _super(obj, p, cycle):
    p.begin_group(8, "<super: ")
    p.pretty(obj.__thisclass__)
    p.text(",")
    p.breakable()
    p.pretty(obj.__self__)
    p.end_group(8, ">")


# re.TEMPLATE is gone in Python 3.13 (deprecated since 3.11): only the flags this Python has are named.
_RE_FLAGS = tuple(f for f in ("TEMPLATE", "IGNORECASE", "LOCALE", "MULTILINE", "DOTALL", "UNICODE", "VERBOSE",
                              "DEBUG") if hasattr(re, f))


def _pattern(obj, p, cycle):
    text = repr(obj.pattern)
    if text[:1] in "uU":
        text, prefix = text[1:], "ur"
    else:
        prefix = "r"
    args = [_Raw(prefix + text.replace("\\\\", "\\"))]
    if obj.flags:
        args.append(_Raw("|".join("re." + f for f in _RE_FLAGS if obj.flags & getattr(re, f))))
    p.pretty(_Call("re.compile", *args))


def _namespace(obj, p, cycle):
    p.pretty(_Call("namespace", _Raw("...")) if cycle else _Call("namespace", **obj.__dict__))


_SINGLETONS = frozenset(map(id, (None, True, False, Ellipsis, NotImplemented)))

_TYPES = {
    int: _repr,
    float: _repr,
    str: _repr,
    bytes: _repr,
    range: _repr,
    slice: _repr,
    tuple: _items("(", ")", one_tuple=True),
    list: _items("[", "]"),
    dict: _mapping("{", "}"),
    types.MappingProxyType: _mapping("mappingproxy({", "})"),
    set: _set("{", "}"),
    frozenset: _set("frozenset({", "})"),
    super: _super,
    type(re.compile("")): _pattern,
    type: _type,
    types.FunctionType: _function,
    types.BuiltinFunctionType: _function,
    types.MethodType: _repr,
    types.SimpleNamespace: _namespace,
    datetime.datetime: _repr,
    datetime.timedelta: _repr,
    BaseException: _exception,
}
if type(os.environ) is not dict:
    _TYPES[type(os.environ)] = _mapping("environ{", "}")       # os.environ prints like a dict

# Printers for classes named by module and name, so that their modules need not be imported here.
_BY_NAME = {
    ("collections", "defaultdict"): _call_of(lambda d: ((d.default_factory, dict(d)), {})),
    ("collections", "OrderedDict"): _call_of(lambda d: (((list(d.items()),) if d else ()), {})),
    ("collections", "deque"): _call_of(
        lambda d: ((list(d),), {"maxlen": d.maxlen} if d.maxlen is not None else {})),
    ("collections", "Counter"): _call_of(lambda d: (((dict(d),) if d else ()), {})),
    ("collections", "UserList"): _call_of(lambda d: ((d.data,), {})),
}


def _printer_for(cls):
    printer = _TYPES.get(cls)
    if printer is None and _BY_NAME:
        printer = _BY_NAME.pop((_getattr(cls, "__module__", None), _getattr(cls, "__name__", None)), None)
        if printer is not None:
            _TYPES[cls] = printer
    return printer


def for_type(cls, printer):
    """Registers printer(obj, p, cycle) for cls and its subclasses; returns the one it replaces."""
    old = _TYPES.get(cls)
    if printer is not None:
        _TYPES[cls] = printer
    return old


def for_type_by_name(module, name, printer):
    """As for_type, for the class module.name, without importing it."""
    old = _BY_NAME.get((module, name))
    if printer is not None:
        _BY_NAME[(module, name)] = printer
    return old
