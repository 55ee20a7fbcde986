"""The standard library's completer, pyc._complete's own (no jedi): names of the namespace, builtins and
keywords, attributes of objects reached without calling anything (`os.pa`, `d['k'].up`), dict keys
(`d['ke`), keyword arguments of the call around the cursor, modules and their names in import statements,
and file paths inside strings.

_std_items(code, pos, ns, st, line) gives the completions at pos as (start, end, text, type, signature)
items; pyc._complete builds the reply from them (and from jedi's), and uses the helpers that describe a
live object (_kind, _signature_of, _static_member, _hidden) and time budgets (_Budget) for jedi's matches
too.  Nothing here runs user code: attributes are read statically where a property could run.
"""

import os
import re
import sys
import time

from . import _source

_IDENT_BEFORE = re.compile(r"\w*\Z")
_KEYWORDS = None  # keyword.kwlist, loaded on first use

#: Time budget (seconds) of one reply for the signatures in the metadata (from the live objects).
_STD_SIGNATURE_BUDGET = 0.003

_MAX_MATCHES = 2000


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
    """A time budget that starts when it is first asked: the first item it guards is always done (on a
    loaded machine, what ran before it must not cost the one signature a single match shows), the others
    while time is left."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.deadline = None

    def left(self):
        now = time.perf_counter()
        if self.deadline is None:
            self.deadline = now + self.seconds
            return True
        return now < self.deadline


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
