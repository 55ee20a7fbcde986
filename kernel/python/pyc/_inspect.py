"""Object inspection for the kernel's inspect_request (Shift-Tab in Jupyter) and for `obj?` / `obj??`.

inspect(code, cursor_pos, detail_level, namespace) finds the expression at the cursor -- the dotted name
under or just before it, or, when the cursor is inside a call's parentheses, the function being called, as
IPython does -- evaluates it without calling anything, properties included (pyc._source.guarded_eval with
static) -- and returns the content of an inspect_reply whose text/plain is describe()'s text: signature, docstring, file and type (detail 0), the
source instead of the docstring when it is available (detail 1).  The layout follows IPython's (plain text,
no colours).  Unknown names give found=False; inspect() never raises.
"""

import re
import sys

from . import _source

_WORD_AFTER = re.compile(r"\w*")
_STRING_FORM_MAX = 200
_SUBCLASSES_MAX = 20


def inspect(code, cursor_pos, detail_level=0, namespace=None):
    """The content of an inspect_reply for the expression at cursor_pos in code."""
    not_found = {"status": "ok", "found": False, "data": {}, "metadata": {}}
    try:
        ns = namespace if namespace is not None else {}
        expr = find_expression(code, cursor_pos, ns)
        if expr is None:
            return not_found
        text = describe(_source.guarded_eval(expr, ns, static=True), expr, detail_level)
    except Exception:
        return not_found
    return {"status": "ok", "found": True, "data": {"text/plain": text}, "metadata": {}}


def find_expression(code, cursor_pos, namespace=None):
    """The source text of the expression to inspect at cursor_pos, or None: the first of the candidates
    (see candidates()) that evaluates in namespace, or the first candidate when namespace is None."""
    for expr in candidates(code, cursor_pos):
        if namespace is None:
            return expr
        try:
            _source.guarded_eval(expr, namespace, static=True)
            return expr
        except Exception:
            continue
    return None


def candidates(code, cursor_pos):
    """The expressions worth inspecting at cursor_pos, best first: the dotted name the cursor is on or
    right after (`os.path` with the cursor in `path` of `os.path.join`) or the expression that ends just
    before it (`d['a']`, and for a call `f(x)` the callee f), then the callees of the calls whose
    parentheses hold the cursor, innermost first."""
    pos = len(code) if cursor_pos is None else max(0, min(int(cursor_pos), len(code)))
    st = _source.scan(code, pos)
    if st.comment is not None:
        return []
    out = []
    if st.string is None:
        after = _WORD_AFTER.match(code, pos).end()
        if after > pos or (pos > 0 and (_source.is_word_char(code[pos - 1]) or code[pos - 1] in ")]")):
            end_st = _source.scan(code, after) if after > pos else st
            start = _source.expression_start(code, after, end_st)
            if start is not None:
                expr = code[start:after]
                if not _source.is_number(expr):
                    out.append(expr)
                if expr.endswith(")"):
                    opening = end_st.closes.get(after - 1)
                    if opening is not None and opening > start:
                        out.append(code[start:opening])
    for index, char in reversed(st.brackets):
        if char != "(" or index == 0:
            continue
        prev = code[index - 1]
        if not (_source.is_word_char(prev) or prev in ")]"):
            continue
        start = _source.expression_start(code, index, st)
        if start is not None and start < index:
            out.append(code[start:index])
    return out


# ---- the text ---------------------------------------------------------------------------------------------


def _format_fields(fields):
    """IPython's layout: 'Title: value' with titles padded to the same width, multi-line values on the
    lines after their title."""
    width = max(len(t) for t, _ in fields) + 1
    out = []
    for title, value in fields:
        value = value.rstrip()
        if "\n" in value:
            out.append(title + ":\n" + value)
        else:
            out.append((title + ":").ljust(width) + " " + value)
    return "\n".join(out) + "\n"


def _signature(obj):
    import inspect as std

    try:
        return str(std.signature(obj))
    except Exception:
        return None


def _doc(obj):
    import inspect as std

    try:
        doc = std.getdoc(obj)
    except Exception:
        doc = None
    return doc


def _own_doc(obj):
    import inspect as std

    doc = getattr(obj, "__doc__", None)
    return std.cleandoc(doc) if isinstance(doc, str) else None


def _source_of(obj):
    import inspect as std

    if _session_class(obj):
        # A class of the session is found by the file of its methods first: inspect looks in its module's
        # __file__ (from Python 3.13 on at its __firstlineno__), and __main__'s __file__ is not the cell the
        # class was defined in (under `python -m pytest` it is pytest's __main__.py, after %run the
        # script's).  What inspect finds is taken only when it defines a class of that name.
        source = _class_source(obj)
        if source is not None:
            return source
        try:
            source = std.getsource(obj)
        except Exception:
            return None
        return source if re.search(r"^\s*class\s+%s\b" % re.escape(obj.__name__), source, re.M) else None
    try:
        return std.getsource(obj)
    except Exception:
        pass
    if isinstance(obj, type):
        return _class_source(obj)
    return None


def _class_source(cls):
    """The source of a class in the file of one of its functions: the innermost ClassDef of that name that
    holds the function's first line (a class defined in a cell, whose module __main__ has no file of its own,
    included)."""
    import ast
    import linecache

    code = _method_code(cls)
    if code is None:
        return None
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return None
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError:
        return None
    best = None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ClassDef)
            and node.name == cls.__name__
            and node.lineno <= code.co_firstlineno <= node.end_lineno
        ):
            if best is None or node.lineno > best.lineno:
                best = node
    if best is None:
        return None
    first = min([best.lineno] + [d.lineno for d in best.decorator_list])
    return "".join(lines[first - 1 : best.end_lineno])


def _session_class(obj):
    """Whether obj is a class defined in the session (module __main__), whose file inspect cannot know."""
    return isinstance(obj, type) and getattr(obj, "__module__", None) == "__main__"


def _method_code(cls):
    """The code of the first function defined in cls's body (plain, class- or static method, property), or
    None."""
    import types

    for v in vars(cls).values():
        v = getattr(v, "__func__", None) or getattr(v, "fget", None) or v
        if isinstance(v, types.FunctionType):
            return v.__code__
    return None


def _file_of(obj):
    import inspect as std

    if _session_class(obj):
        # as in _source_of: the file of its methods, not __main__'s __file__
        code = _method_code(obj)
        f = code.co_filename if code is not None else None
        return f if f and not f.startswith("<") else None
    try:
        f = std.getsourcefile(obj) or std.getfile(obj)
    except Exception:
        return None
    if f and f.startswith("<frozen "):
        # a frozen stdlib module (os, posixpath, ...): the file it was frozen from
        mod = sys.modules.get(getattr(obj, "__module__", None) or "")
        f = getattr(mod, "__file__", None)
    if not f or f.startswith("<"):
        return None
    return f


def _string_form(obj):
    try:
        s = str(obj)
    except Exception:
        return None
    if len(s) > _STRING_FORM_MAX:
        half = _STRING_FORM_MAX // 2
        s = s[:half] + " <...> " + s[-half:]
    return s


def _is_routine(obj):
    import functools
    import inspect as std

    return std.isroutine(obj) or isinstance(obj, functools.partial)


def describe(obj, name, detail_level=0):
    """The text shown for obj (written `name` by the user) at detail 0 (signature, docstring, file, type) or
    1 (the source instead of the docstring, when there is source)."""
    import types

    fields = []
    typename = type(obj).__name__
    source = _source_of(obj) if detail_level >= 1 else None

    if isinstance(obj, type):
        sig = _signature(obj)
        if sig is not None:
            fields.append(("Init signature", name + sig))
        if source is not None:
            fields.append(("Source", source))
        else:
            fields.append(("Docstring", _own_doc(obj) or "<no docstring>"))
            init = getattr(obj, "__init__", None)
            if init is not None and init is not object.__init__:
                idoc = _own_doc(init)
                if idoc and idoc != _own_doc(obj) and idoc != _own_doc(object.__init__):
                    fields.append(("Init docstring", idoc))
        f = _file_of(obj)
        if f:
            fields.append(("File", f))
        fields.append(("Type", typename))
        try:
            subs = type.__subclasses__(obj)
        except Exception:
            subs = []
        if subs:
            names = ", ".join(s.__name__ for s in subs[:_SUBCLASSES_MAX])
            if len(subs) > _SUBCLASSES_MAX:
                names += ", ..."
            fields.append(("Subclasses", names))
        return _format_fields(fields)

    if _is_routine(obj):
        sig = _signature(obj)
        if sig is not None:
            fields.append(("Signature", name + sig))
        if source is not None:
            fields.append(("Source", source))
        else:
            fields.append(("Docstring", _doc(obj) or "<no docstring>"))
        f = _file_of(obj)
        if f:
            fields.append(("File", f))
        fields.append(("Type", typename))
        return _format_fields(fields)

    fields.append(("Type", typename))
    s = _string_form(obj)
    if s is not None:
        fields.append(("String form", s))
    if not isinstance(obj, types.ModuleType) and hasattr(type(obj), "__len__"):
        try:
            fields.append(("Length", str(len(obj))))
        except Exception:
            pass
    if isinstance(obj, types.ModuleType):
        f = _file_of(obj)
        if f:
            fields.append(("File", f))
    if source is not None and isinstance(obj, types.ModuleType):
        fields.append(("Source", source))
    else:
        fields.append(("Docstring", _doc(obj) or "<no docstring>"))
    if callable(obj) and not isinstance(obj, types.ModuleType):
        sig = _signature(obj)
        if sig is not None:
            fields.append(("Call signature", name + sig))
        call = getattr(type(obj), "__call__", None)
        cdoc = _own_doc(call) if call is not None else None
        if cdoc:
            fields.append(("Call docstring", cdoc))
    return _format_fields(fields)
