"""Code completion for the kernel's complete_request.

complete(code, cursor_pos, namespace) returns the content of a complete_reply: the matches, the span of code
they replace (cursor_start, cursor_end; positions are str indices, i.e. Unicode code points, as the Jupyter
protocol counts them) and, as IPython sends, metadata["_jupyter_types_experimental"] with each match's type
and signature.

jedi is used when it is importable and the environment variable PYC_NO_JEDI is unset (or "0"); when jedi is
missing, raises, or finds nothing, a completer built on the standard library (pyc._complete_std) takes
over: names, attributes, dict keys, keyword arguments, imports and file paths.  This module itself
completes pyc's magics (`%ti`) and the paths of shell lines, and asks jedi.  complete() never raises: on
any failure the reply has no matches and cursor_start == cursor_end == cursor_pos.

request() is the kernel's complete_request.  jedi's first completion in a process is slow: it parses the
typeshed stubs and typing modules it needs (1.1-1.3 s with jedi 0.20 on Python 3.14, 0.4 s on 3.11), and
JupyterLab waits 1000 ms for a completion provider, then drops its answer (Tab showed nothing).  So until
jedi has completed once (warm_up, or a completion the standard library could not answer), request() asks
the standard library first, which answers in milliseconds, and jedi only when it finds nothing; the kernel
runs warm_up() after the first complete_request, in a pause of the requests, so that jedi's memory (about
35 MB) and its warm-up are paid only by sessions whose frontend completes.
"""

import os
import re
import sys

from . import _source

from ._complete_std import (_MAX_MATCHES, _STD_SIGNATURE_BUDGET, _Budget, _hidden, _kind, _path_items,
                            _signature_of, _static_member, _std_items)

_LINE_BREAKS = re.compile(r"\r\n|\r|\n")

#: Time budget (seconds) of one reply for jedi's inference of the types of the matches that are not live
#: objects (the signatures share the standard library's budget, _STD_SIGNATURE_BUDGET).
_JEDI_TYPE_BUDGET = 0.1
_MISSING = object()


_jedi_warm = False  # jedi has completed once in this process: its next completions are quick


def request(code, cursor_pos, namespace=None):
    """complete_request: complete(), with the standard library first while jedi is cold (module docstring)."""
    return complete(code, cursor_pos, namespace, std_first=not _jedi_warm)


def complete(code, cursor_pos, namespace=None, std_first=False):
    """Completions of code at cursor_pos in namespace: the content of a complete_reply.  std_first: the
    standard library's completer first, jedi only when it finds nothing."""
    try:
        code = code if isinstance(code, str) else str(code)
        pos = len(code) if cursor_pos is None else int(cursor_pos)
        pos = max(0, min(pos, len(code)))
    except Exception:
        return _empty(cursor_pos if isinstance(cursor_pos, int) else 0)
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            items = _complete(code, pos, namespace if namespace is not None else {}, std_first)
        return _reply(code, pos, items)
    except Exception:
        return _empty(pos)


def warm_up():
    """Imports jedi and completes once, so that its next completions are quick.  Returns True when jedi is in
    use.  The kernel calls this when it goes idle after its first complete_request (0.3-1.3 s).  Warnings
    are silenced as in complete(): jedi's imports are no cell's."""
    global _jedi_warm
    if not _use_jedi():
        return False
    try:
        complete("import os\nos.pa", 16, {"os": os})
        return "jedi" in sys.modules
    except Exception:
        return False
    finally:
        _jedi_warm = True  # tried once: a jedi that failed here is not tried again first


def _empty(pos):
    return {
        "matches": [],
        "cursor_start": pos,
        "cursor_end": pos,
        "metadata": {"_jupyter_types_experimental": []},
        "status": "ok",
    }


def _reply(code, pos, items):
    """Builds the reply from (start, end, text, type, signature) items, widening every match to the union
    of their spans (the protocol has one span for all matches), without duplicates."""
    if not items:
        return _empty(pos)
    start = min(it[0] for it in items)
    end = max(it[1] for it in items)
    seen = set()
    matches = []
    types = []
    for s, e, text, typ, sig in items:
        full = code[start:s] + text + code[e:end]
        if full in seen:
            continue
        seen.add(full)
        matches.append(full)
        types.append({"start": start, "end": end, "text": full, "type": typ, "signature": sig})
        if len(matches) >= _MAX_MATCHES:
            break
    return {
        "matches": matches,
        "cursor_start": start,
        "cursor_end": end,
        "metadata": {"_jupyter_types_experimental": types},
        "status": "ok",
    }


def _use_jedi():
    return os.environ.get("PYC_NO_JEDI", "") in ("", "0")


def _complete(code, pos, namespace, std_first=False):
    line_start = max(code.rfind("\n", 0, pos), code.rfind("\r", 0, pos)) + 1
    line = code[line_start:pos]
    special = _special_line(code, pos, line, line_start)
    if special is not None:
        return special
    st = _source.scan(code, pos)
    if st.comment is not None:
        return []
    items = _std_items(code, pos, namespace, st, line) if std_first else None
    if not items and _use_jedi():
        try:
            items = _jedi_items(code, pos, namespace, st.string is not None)
        except Exception:
            items = None
    if not items and not std_first:
        items = _std_items(code, pos, namespace, st, line)
    return items


# ---- magic and shell lines --------------------------------------------------------------------------------

_MAGIC_PREFIX = re.compile(r"\s*(%%?)(\w*)\Z")
_SHELL_LINE = re.compile(r"\s*(?:[\w.]+\s*=\s*)?(!|%cd\s|%%?\w+\s)")


def _statement_starts_at(code, line_start):
    if line_start == 0:
        return True
    prev = _source.scan(code, line_start)
    if prev.string is not None or prev.brackets:
        return False
    before = code[:line_start].rstrip("\r\n")
    return not before.endswith("\\")


def _special_line(code, pos, line, line_start):
    """Completions of pyc's magic names and of paths on `!` and `%cd` lines; None for other lines."""
    m = _MAGIC_PREFIX.match(line)
    m2 = _SHELL_LINE.match(line) if m is None else None
    if m is None and m2 is None:
        return None
    if not _statement_starts_at(code, line_start):
        return None
    if m is not None:
        from . import _magics

        percent, word = m.group(1), m.group(2)
        lines, cells = _magics.own_magic_names()
        names = cells if percent == "%%" else lines
        if percent == "%%" and line_start != 0 and code[:line_start].strip():
            return []
        start = pos - len(word) - len(percent)
        return [(start, pos, percent + n, "magic", "") for n in sorted(names) if n.startswith(word)]
    kind = m2.group(1)
    if kind.startswith("%") and not kind.startswith("%cd"):
        return None  # %time, %timeit, ... are followed by Python: complete it as such
    word = re.search(r"[^\s'\"=<>|;&]*\Z", line).group()
    return _path_items(word, pos, dirs_only=kind.startswith("%cd"))


# ---- jedi ------------------------------------------------------------------------------------------------


def _line_column(code, pos):
    """jedi's 1-based line and 0-based column (code points) of pos; lines end at \\n, \\r\\n or \\r, as
    parso splits them."""
    line = 1
    last = 0
    for m in _LINE_BREAKS.finditer(code, 0, pos):
        line += 1
        last = m.end()
    return line, pos - last


def _jedi_items(code, pos, namespace, in_string):
    import jedi

    line, column = _line_column(code, pos)
    completions = jedi.Interpreter(code, [namespace]).complete(line, column)
    global _jedi_warm
    _jedi_warm = True
    nxt = code[pos : pos + 1]
    live = _Live(code, namespace)
    type_budget = _Budget(_JEDI_TYPE_BUDGET)
    sig_budget = _Budget(_STD_SIGNATURE_BUDGET)
    items = []
    for c in completions:
        text = c.name_with_symbols
        rest = c.complete
        if rest is None:
            continue
        typed = len(text) - len(rest)
        if not in_string and _hidden(text, text[:typed]):
            continue
        start = pos - typed
        end = pos
        if text[-1:] in ("'", '"') and nxt == text[-1] and len(text) > 1:
            end = pos + 1  # a dict key whose closing quote is already typed
        # jedi's types of instance attributes can take a second to infer (pandas): the live object's
        # type when there is one, jedi's within a budget, else IPython's "<unknown>"
        typ, value = (None, None) if in_string else live.member(start, text)
        if typ is None:
            typ = c.type if type_budget.left() else "<unknown>"
        sig = ""
        if typ == "function" and value is not None and sig_budget.left():
            sig = _signature_of(value)
        items.append((start, end, text, typ, sig))
        if len(items) >= _MAX_MATCHES:
            break
    return items


class _Live:
    """Types and values of jedi's matches found in the live namespace: a name, or an attribute of the object
    before the dot (evaluated with guarded_eval, once per position)."""

    def __init__(self, code, ns):
        self.code = code
        self.ns = ns
        self.receivers = {}

    def member(self, start, name):
        """(type, value) of the match `name` replacing code from start; (None, None) when unknown."""
        code = self.code
        try:
            if start > 0 and code[start - 1] == ".":
                if start not in self.receivers:
                    self.receivers[start] = _MISSING
                    st = _source.scan(code, start - 1)
                    estart = _source.expression_start(code, start - 1, st)
                    if estart is not None and estart < start - 1 and not _source.is_number(code[estart : start - 1]):
                        self.receivers[start] = _source.guarded_eval(code[estart : start - 1], self.ns)
                obj = self.receivers[start]
                if obj is _MISSING:
                    return None, None
                typ, value = _static_member(obj, name)
                if typ == "function":
                    value = getattr(obj, name)
                return typ, value
            if not name.isidentifier():
                return None, None
            value = _source.lookup_name(name, self.ns)
            return _kind(value), value
        except Exception:
            return None, None
