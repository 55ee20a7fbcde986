"""Code completion for the kernel's complete_request.

complete(code, cursor_pos, namespace) returns the content of a complete_reply: the matches, the span of code
they replace (cursor_start, cursor_end; positions are str indices, i.e. Unicode code points, as the Jupyter
protocol counts them) and, as IPython sends, metadata["_jupyter_types_experimental"] with each match's type
and signature.

jedi is used when it is importable and the environment variable PYC_NO_JEDI is unset (or "0"); when jedi is
missing, raises, or finds nothing, a completer built on the standard library takes over.  It knows names
(the namespace, builtins, keywords), attributes of objects reachable without calling anything (`os.pa`,
`d['k'].up`), dict keys (`d['ke`), keyword arguments of the call around the cursor, modules and their
names in import statements, file paths inside strings, and pyc's magics (`%ti`).  complete() never
raises: on any failure the reply has no matches and cursor_start == cursor_end == cursor_pos.

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
import time

from . import _source

_IDENT_BEFORE = re.compile(r"\w*\Z")
_LINE_BREAKS = re.compile(r"\r\n|\r|\n")
_KEYWORDS = None  # keyword.kwlist, loaded on first use

#: Time budgets (seconds) of one reply: for the signatures in the metadata (from the live objects), and
#: for jedi's inference of the types of the matches that are not live objects.
_STD_SIGNATURE_BUDGET = 0.003
_JEDI_TYPE_BUDGET = 0.1
_MISSING = object()

_MAX_MATCHES = 2000


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


# ---- standard library ------------------------------------------------------------------------------------


def _std_items(code, pos, ns, st, line):
    if st.string is not None:
        return _string_items(code, pos, ns, st)
    prefix = _IDENT_BEFORE.search(code, 0, pos).group()
    if prefix[:1].isdigit():
        return []
    pstart = pos - len(prefix)
    imp = _import_items(code, pos, line, prefix)
    if imp is not None:
        return imp
    if pstart > 0 and code[pstart - 1] == ".":
        return _attribute_items(code, pos, pstart, prefix, ns, st)
    items = []
    if not prefix and code[pos - 1 : pos] == "[":
        items.extend(_key_items(code, pos, pos, pos - 1, ns, st, None))
    items.extend(_param_items(code, pstart, prefix, ns, st))
    items.extend(_name_items(pstart, pos, prefix, ns))
    return items


def _hidden(name, prefix):
    """rlcompleter's rule: _names only when the prefix starts with _, __names only when it starts with __."""
    if not prefix:
        return name.startswith("_")
    if prefix == "_":
        return name.startswith("__")
    return False


def _sort_key(name):
    return (name.startswith("_"), name.lower(), name)


def _kind(value):
    """The completion type of a value, in jedi's words."""
    import types

    if isinstance(value, types.ModuleType):
        return "module"
    if isinstance(value, type):
        return "class"
    if isinstance(value, (property,)) or type(value).__name__ in ("getset_descriptor", "member_descriptor"):
        return "property"
    if isinstance(
        value,
        (
            types.FunctionType,
            types.BuiltinFunctionType,
            types.MethodType,
            types.MethodDescriptorType,
            types.WrapperDescriptorType,
            types.MethodWrapperType,
            types.ClassMethodDescriptorType,
            staticmethod,
            classmethod,
        ),
    ):
        return "function"
    if type(value).__name__ == "partial":
        return "function"
    return "instance"


def _signature_of(value):
    import inspect

    try:
        return str(inspect.signature(value))
    except Exception:
        return "(?)"


class _Budget:
    def __init__(self, seconds):
        self.deadline = time.perf_counter() + seconds

    def left(self):
        return time.perf_counter() < self.deadline


def _name_items(start, pos, prefix, ns):
    global _KEYWORDS
    if _KEYWORDS is None:
        import keyword

        _KEYWORDS = list(keyword.kwlist) + ["match", "case"]
    found = {}
    for kw in _KEYWORDS:
        if kw.startswith(prefix):
            found[kw] = ("keyword", None)
    b = ns.get("__builtins__")
    if b is None:
        import builtins as b
    bdict = b if isinstance(b, dict) else getattr(b, "__dict__", {})
    for source in (bdict, ns):
        for name in list(source):
            if isinstance(name, str) and name.startswith(prefix) and not _hidden(name, prefix):
                found[name] = (None, source[name])
    budget = _Budget(_STD_SIGNATURE_BUDGET)
    items = []
    for name in sorted(found, key=_sort_key):
        typ, value = found[name]
        sig = ""
        if typ is None:
            typ = _kind(value)
            if typ == "function" and budget.left():
                sig = _signature_of(value)
        items.append((start, pos, name, typ, sig))
    return items


def _static_member(obj, name):
    """(type, value-or-None) of obj.name found without running descriptors (inspect.getattr_static's idea,
    simplified): the instance's __dict__, then the class's MRO."""
    import types

    if isinstance(obj, types.ModuleType):
        d = obj.__dict__
        if name in d:
            return _kind(d[name]), d[name]
        return None, None
    try:
        d = object.__getattribute__(obj, "__dict__")
    except Exception:
        d = None
    if isinstance(obj, type):
        mro = type.__dict__["__mro__"].__get__(obj)
        for klass in mro:
            if name in klass.__dict__:
                v = klass.__dict__[name]
                typ = _kind(v)
                return typ, v
        mro = type(obj).__mro__
    else:
        if isinstance(d, dict) and name in d:
            return _kind(d[name]), d[name]
        mro = type(obj).__mro__
    for klass in mro:
        kd = klass.__dict__
        if name in kd:
            v = kd[name]
            return _kind(v), v
    return None, None


def _attribute_items(code, pos, pstart, prefix, ns, st):
    dot = pstart - 1
    estart = _source.expression_start(code, dot, st)
    if estart is None:
        return []
    expr = code[estart:dot]
    if not expr.strip() or _source.is_number(expr):
        return []
    try:
        obj = _source.guarded_eval(expr, ns)
    except Exception:
        return []
    try:
        names = set(dir(obj))
    except Exception:
        names = set()
    if hasattr(obj, "__class__"):
        names.add("__class__")
    names.discard("__builtins__")
    budget = _Budget(_STD_SIGNATURE_BUDGET)
    items = []
    for name in sorted(names, key=_sort_key):
        if not isinstance(name, str) or not name.startswith(prefix) or _hidden(name, prefix):
            continue
        try:
            typ = _static_member(obj, name)[0]
        except Exception:
            typ = None
        if typ is None:
            typ = "instance"
        sig = ""
        if typ == "function" and budget.left():
            try:
                sig = _signature_of(getattr(obj, name))
            except Exception:
                sig = ""
        items.append((pstart, pos, name, typ, sig))
    return items


def _keys_of(obj):
    """Keys offered after obj[: IPython's _ipython_key_completions_ protocol, then mapping keys, then the
    field names of numpy structured arrays."""
    f = getattr(type(obj), "_ipython_key_completions_", None)
    if f is not None:
        return list(f(obj))
    if isinstance(obj, dict):
        return list(obj.keys())
    keys = getattr(type(obj), "keys", None)
    if keys is not None and hasattr(type(obj), "__getitem__"):
        mod = getattr(type(obj), "__module__", "") or ""
        if not mod.startswith("numpy"):
            try:
                return list(obj.keys())
            except Exception:
                return []
    dtype = getattr(obj, "dtype", None)
    names = getattr(dtype, "names", None)
    if names:
        return list(names)
    return []


def _quote_key(key, quote):
    body = key.replace("\\", "\\\\").replace(quote, "\\" + quote).replace("\n", "\\n")
    return quote + body + quote


def _key_items(code, pos, start, bracket, ns, st, string):
    """Keys of the object subscripted by the `[` at index bracket.  string: None (no quote typed yet, the
    keys are offered as literals) or (literal_start, body_start, quote) of the key being typed."""
    estart = _source.expression_start(code, bracket, st)
    if estart is None or estart == bracket:
        return []
    try:
        obj = _source.guarded_eval(code[estart:bracket], ns)
        keys = _keys_of(obj)
    except Exception:
        return []
    items = []
    if string is None:
        for k in keys[:_MAX_MATCHES]:
            if isinstance(k, (str, bytes, int, float, bool, type(None))):
                items.append((start, pos, repr(k), "dict key", ""))
        return items
    lit_start, body, quote = string
    prefix_letters = code[lit_start : body - len(quote)].lower()
    typed = code[body:pos]
    want_bytes = "b" in prefix_letters
    end = pos + 1 if code[pos : pos + 1] == quote else pos
    for k in keys:
        if want_bytes and isinstance(k, bytes):
            try:
                k = k.decode("ascii")
            except UnicodeDecodeError:
                continue
        elif want_bytes or not isinstance(k, str):
            continue
        if k.startswith(typed):
            text = code[lit_start : body - len(quote)] + _quote_key(k, quote[0])
            items.append((lit_start, end, text, "dict key", ""))
    return items


def _string_items(code, pos, ns, st):
    lit_start, body, quote = st.string
    before = code[:lit_start].rstrip()
    if before.endswith("["):
        items = _key_items(code, pos, lit_start, len(before) - 1, ns, st, st.string)
        if items:
            return items
    typed = code[body:pos]
    if "\n" in typed:
        typed = typed[typed.rfind("\n") + 1 :]
    return _path_items(typed, pos)


def _path_items(word, pos, dirs_only=False):
    """Entries of the directory that word names, whose names start with word's last component."""
    if "/" in word:
        dirname, base = word.rsplit("/", 1)
        directory = dirname + "/" if dirname else "/"
    else:
        directory, base = "", word
    path = os.path.expandvars(os.path.expanduser(directory)) if directory else "."
    try:
        entries = list(os.scandir(path))
    except OSError:
        return []
    start = pos - len(base)
    items = []
    for e in entries:
        name = e.name
        if not name.startswith(base) or (name.startswith(".") and not base.startswith(".")):
            continue
        try:
            isdir = e.is_dir()
        except OSError:
            isdir = False
        if dirs_only and not isdir:
            continue
        items.append((start, pos, name + "/" if isdir else name, "path", ""))
    items.sort(key=lambda it: (it[2].startswith("."), it[2].lower()))
    return items[:_MAX_MATCHES]


def _param_items(code, pstart, prefix, ns, st):
    """`name=` for the keyword parameters of the call the cursor is in, when it is at an argument's start."""
    if not st.brackets or st.brackets[-1][1] != "(":
        return []
    before = code[:pstart].rstrip()
    if not before.endswith(("(", ",")):
        return []
    paren = st.brackets[-1][0]
    estart = _source.expression_start(code, paren, st)
    if estart is None or estart == paren:
        return []
    try:
        import inspect

        fn = _source.guarded_eval(code[estart:paren], ns)
        params = inspect.signature(fn).parameters.values()
    except Exception:
        return []
    items = []
    for p in params:
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name.startswith(prefix):
            items.append((pstart, pstart + len(prefix), p.name + "=", "param", ""))
    return items


# ---- imports ---------------------------------------------------------------------------------------------

_IMPORT = re.compile(r"\s*import\s+(?:[\w.]+(?:\s+as\s+\w+)?\s*,\s*)*([\w.]*)\Z")
_FROM = re.compile(r"\s*from\s+([\w.]*)\Z")
_FROM_IMPORT_KW = re.compile(r"\s*from\s+[\w.]+\s+(\w*)\Z")
_FROM_IMPORT = re.compile(r"\s*from\s+([\w.]+)\s+import\s+\(?\s*(?:\w+(?:\s+as\s+\w+)?\s*,\s*)*(\w*)\Z")

_modules_cache = {"key": None, "time": 0.0, "names": ()}
_MODULES_TTL = 30.0


def _import_items(code, pos, line, prefix):
    stmt = line[line.rfind(";") + 1 :]
    m = _IMPORT.match(stmt) or _FROM.match(stmt)
    if m is not None:
        dotted = m.group(1)
        if dotted.startswith("."):
            return []
        parent, _, last = dotted.rpartition(".")
        names = _submodules(parent)
        return [
            (pos - len(last), pos, n, "module", "")
            for n in sorted(names, key=_sort_key)
            if n.startswith(last) and not _hidden(n, last)
        ]
    m = _FROM_IMPORT.match(stmt)
    if m is not None:
        module, last = m.group(1), m.group(2)
        if module.startswith("."):
            return []
        found = {}
        for n in _submodules(module):
            found[n] = "module"
        for n, typ in _module_names(module):
            found.setdefault(n, typ)
        return [
            (pos - len(last), pos, n, found[n], "")
            for n in sorted(found, key=_sort_key)
            if n.startswith(last) and not _hidden(n, last)
        ]
    m = _FROM_IMPORT_KW.match(stmt)
    if m is not None:
        word = m.group(1)
        return [(pos - len(word), pos, "import", "keyword", "")] if "import".startswith(word) else []
    return None


def _top_level_modules():
    import pkgutil

    key = tuple(sys.path)
    now = time.monotonic()
    c = _modules_cache
    if c["key"] == key and now - c["time"] < _MODULES_TTL:
        return c["names"]
    names = set(sys.builtin_module_names)
    names.update(n for n in sys.modules if "." not in n)
    try:
        names.update(m.name for m in pkgutil.iter_modules())
    except Exception:
        pass
    c["key"], c["time"], c["names"] = key, now, frozenset(names)
    return c["names"]


def _search_locations(dotted):
    """The directories of package `dotted`, found without importing it; None if it is not a package."""
    mod = sys.modules.get(dotted)
    if mod is not None:
        p = getattr(mod, "__path__", None)
        return list(p) if p is not None else None
    import importlib.machinery
    import importlib.util

    parts = dotted.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
    except Exception:
        return None
    for i in range(1, len(parts)):
        if spec is None or spec.submodule_search_locations is None:
            return None
        name = ".".join(parts[: i + 1])
        mod = sys.modules.get(name)
        if mod is not None:
            p = getattr(mod, "__path__", None)
            if p is None:
                return None
            spec = mod.__spec__
            if spec is None:
                return list(p)
            continue
        spec = importlib.machinery.PathFinder.find_spec(name, list(spec.submodule_search_locations))
    if spec is None or spec.submodule_search_locations is None:
        return None
    return list(spec.submodule_search_locations)


def _submodules(parent):
    if not parent:
        return _top_level_modules()
    import pkgutil

    names = set()
    locations = _search_locations(parent)
    if locations:
        try:
            names.update(m.name for m in pkgutil.iter_modules(locations))
        except Exception:
            pass
    lead = parent + "."
    for n in list(sys.modules):
        if n.startswith(lead) and "." not in n[len(lead) :]:
            names.add(n[len(lead) :])
    return names


def _module_names(module):
    """(name, type) of the names module defines: from the module when it is imported, otherwise from its
    source file's top level (parsed, never run)."""
    mod = sys.modules.get(module)
    if mod is not None:
        try:
            d = dict(vars(mod))
        except Exception:
            return []
        return [(n, _kind(v)) for n, v in d.items() if isinstance(n, str)]
    try:
        import importlib.util

        spec = importlib.util.find_spec(module)
    except Exception:
        return []
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py"):
        return []
    try:
        if os.path.getsize(origin) > 2_000_000:
            return []
        import ast

        with open(origin, "rb") as f:
            tree = ast.parse(f.read())
    except Exception:
        return []
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node.name, "function"))
        elif isinstance(node, ast.ClassDef):
            out.append((node.name, "class"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if a.name != "*":
                    kind = "module" if isinstance(node, ast.Import) else "statement"
                    out.append(((a.asname or a.name).split(".")[0], kind))
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out.append((n.id, "statement"))
    return out
