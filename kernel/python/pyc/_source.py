"""Reading Python source that may be incomplete or invalid, for completion, inspection and cell transforms.

scan() follows strings, comments and brackets up to a position without the tokenize module (which gives up
on unterminated strings and on IPython syntax); expression_start() finds where the expression that ends at
a position begins (`os.path` in `f(os.path.jo`); guarded_eval() evaluates such an expression in the user's
namespace without calling anything the user wrote: names, attributes, literals and subscripts of plain
containers only (attribute access may still run a property, as in rlcompleter and IPython).
"""

import re

#: Tokens that change the scanner's state: comments, string quotes and brackets.
TOKEN = re.compile(r"#|'''|\"\"\"|'|\"|[()\[\]{}]")

#: The body of a string after its opening quote; group 1 is the closing quote ("\n" for a one-quote string
#: that the end of the line cut short), None when the string is still open at the end of the text.
STRING_BODY = {
    "'": re.compile(r"[^'\\\n]*(?:\\[\s\S][^'\\\n]*)*('|\n)?"),
    '"': re.compile(r'[^"\\\n]*(?:\\[\s\S][^"\\\n]*)*("|\n)?'),
    "'''": re.compile(r"[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*(''')?"),
    '"""': re.compile(r'[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*(""")?'),
}

_PREFIX_CHARS = "rRbBuUfF"
_OPENERS = "([{"
_CLOSERS = ")]}"
_DOTTED = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
_NUMBER = re.compile(r"\d[\w.]*")


def is_word_char(c):
    return c.isalnum() or c == "_"


class Scan:
    """State of source text at a position.

    string:   None, or (start, body, quote) of the string literal open at the position: start is where the
              literal begins (its prefix letters included), body where its content begins.
    comment:  None, or the index of the '#' of the comment the position is in.
    brackets: [(index, char), ...] of the brackets open at the position, innermost last.
    closes:   {index of a closing bracket: index of its opening bracket}.
    strings:  {index just after a closed string literal: index where the literal begins}.
    """

    __slots__ = ("string", "comment", "brackets", "closes", "strings")

    def __init__(self):
        self.string = None
        self.comment = None
        self.brackets = []
        self.closes = {}
        self.strings = {}


def _literal_start(text, quote_at):
    """Where the literal whose quote is at quote_at begins: its prefix letters (rb'', f'') included."""
    j = quote_at
    while j > 0 and quote_at - j < 2 and text[j - 1] in _PREFIX_CHARS:
        j -= 1
    if j < quote_at and j > 0 and is_word_char(text[j - 1]):
        return quote_at  # letters of a longer name, not a prefix
    return j


def scan(code, end=None):
    """Scans code[:end] (all of it by default) and returns a Scan of the state at end."""
    text = code if end is None else code[:end]
    st = Scan()
    i = 0
    n = len(text)
    search = TOKEN.search
    while i < n:
        m = search(text, i)
        if m is None:
            break
        tok = m.group()
        s = m.start()
        if tok == "#":
            nl = text.find("\n", s)
            if nl < 0:
                st.comment = s
                break
            i = nl + 1
        elif tok in _OPENERS:
            st.brackets.append((s, tok))
            i = s + 1
        elif tok in _CLOSERS:
            if st.brackets:
                st.closes[s] = st.brackets.pop()[0]
            i = s + 1
        else:
            body = s + len(tok)
            m2 = STRING_BODY[tok].match(text, body)
            start = _literal_start(text, s)
            if m2.group(1) is None:
                st.string = (start, body, tok)
                break
            i = m2.end()
            if m2.group(1) != "\n":
                st.strings[i] = start
    return st


def expression_start(text, end, st):
    """Start of the primary expression (names, attributes, calls, subscripts, literals) that ends at `end`
    in text, using the Scan st of text (at least up to end) to match brackets and strings; None if no
    expression ends there."""
    i = end
    while i > 0:
        c = text[i - 1]
        if c in _CLOSERS:
            j = st.closes.get(i - 1)
            if j is None:
                return None
            i = j
            if text[j] in "([" and i > 0 and (is_word_char(text[i - 1]) or text[i - 1] in ")]'\""):
                continue  # a call or subscript trailer: the expression goes on to the left
            return i
        if c in "'\"":
            return st.strings.get(i)
        if is_word_char(c):
            j = i - 1
            while j > 0 and is_word_char(text[j - 1]):
                j -= 1
            i = j
            if i > 1 and text[i - 1] == "." and (is_word_char(text[i - 2]) or text[i - 2] in ")]}'\""):
                i -= 1
                continue
            return i
        return None if i == end else i
    return None if i == end else i


def is_number(expr):
    return _NUMBER.fullmatch(expr) is not None


# ---- guarded evaluation ----------------------------------------------------------------------------------


class Unsafe(Exception):
    """The expression needs something guarded_eval does not do (a call, an operator, ...)."""


_MISSING = object()


def lookup_name(name, namespace):
    """A name's value as the code in namespace sees it (the namespace, then its builtins)."""
    if namespace is not None and name in namespace:
        return namespace[name]
    b = namespace.get("__builtins__") if namespace is not None else None
    if b is None:
        import builtins as b
    if isinstance(b, dict):
        v = b.get(name, _MISSING)
    else:
        v = getattr(b, name, _MISSING)
    if v is _MISSING:
        raise NameError(name)
    return v


def _subscript_ok(container):
    t = type(container)
    if isinstance(container, (dict, list, tuple, str, bytes, range)):
        return True
    mod = getattr(t, "__module__", "") or ""
    return mod.startswith(("pandas.", "numpy", "collections"))


def static_attr(obj, name):
    """obj.name without running code of obj's: the attribute as it is stored (inspect.getattr_static), so that
    a property or another descriptor is never called -- a property that loops forever must not wedge the
    kernel on Shift-Tab.  Functions, classmethods and staticmethods are bound as getattr would (their __get__
    is the interpreter's own); any other descriptor (a property, a slot, a custom __get__) is returned
    itself, which is what an inspection shows (its docstring and type)."""
    import inspect
    import types

    value = inspect.getattr_static(obj, name)
    if isinstance(obj, type):
        # on a class, getattr binds only classmethods and unwraps staticmethods
        if isinstance(value, (classmethod, staticmethod)):
            return value.__get__(None, obj)
        return value
    try:
        own = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        own = {}
    if isinstance(own, dict) and own.get(name, _MISSING) is value:
        return value             # the instance's own attribute (a module's function): never bound
    if isinstance(value, (types.FunctionType, classmethod, staticmethod, types.BuiltinFunctionType,
                          types.MethodDescriptorType, types.ClassMethodDescriptorType)):
        return value.__get__(obj, type(obj))
    return value


def guarded_eval(expr, namespace, static=False):
    """Evaluates an expression made of names, attributes, literals and subscripts of plain containers
    (dict, list, tuple, str, collections, numpy, pandas) in namespace; raises on anything else.  With static,
    attributes are read without calling properties or other descriptors (static_attr): for inspection, which
    must never run user code."""
    expr = expr.strip()
    attr = static_attr if static else getattr
    if _DOTTED.fullmatch(expr):
        parts = expr.split(".")
        obj = lookup_name(parts[0], namespace)
        for p in parts[1:]:
            obj = attr(obj, p)
        return obj
    import ast

    tree = ast.parse(expr, mode="eval")
    return _eval_node(tree.body, namespace, ast, attr)


def _eval_node(node, ns, ast, attr=getattr):
    if isinstance(node, ast.Name):
        return lookup_name(node.id, ns)
    if isinstance(node, ast.Attribute):
        return attr(_eval_node(node.value, ns, ast, attr), node.attr)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Subscript):
        container = _eval_node(node.value, ns, ast, attr)
        if not _subscript_ok(container):
            raise Unsafe("subscript of %s" % type(container).__name__)
        key = _eval_node(node.slice, ns, ast, attr)
        if isinstance(container, dict) and type(container) is not dict:
            # defaultdict (__missing__) and friends would create the key: look, do not touch
            if not dict.__contains__(container, key):
                raise KeyError(key)
            return dict.__getitem__(container, key)
        return container[key]
    if isinstance(node, ast.Slice):
        parts = [None if p is None else _eval_node(p, ns, ast, attr) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_eval_node(e, ns, ast, attr) for e in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise Unsafe("dict unpacking")
        return {_eval_node(k, ns, ast, attr): _eval_node(v, ns, ast, attr) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.JoinedStr):
        return ""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _eval_node(node.operand, ns, ast, attr)
        if isinstance(v, (int, float, complex)):
            return -v if isinstance(node.op, ast.USub) else v
    raise Unsafe(type(node).__name__)
