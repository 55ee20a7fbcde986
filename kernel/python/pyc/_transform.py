"""Cell transforms: IPython's input language -- the lines that users and agents type, and the sessions they
paste -- rewritten as Python and calls of pyc._magics, as IPython's input transformers rewrite them.

transform_cell(code, namespace) applies, in IPython's order:

 1. When the cell does not parse and its first line is indented, that indentation is removed from every
    line that starts with it (IPython's leading_indent; a doctest pasted from a docstring keeps its
    `>>>` for step 2).
 2. Pasted prompts are removed, when the cell's first line starts with one or its second line does (as
    IPython's PromptStripper decides): the standard interpreter's `>>> ` and `... `, and IPython's
    `In [12]: ` and `   ...: ` (with the `[nav] ` / `[ins] ` of its vi mode).  This holds even for a cell
    that parses: `In [1]: b = 5` is an annotated assignment to Python.
 3. Automagic, on a one-line cell (leading blank lines aside) and only with a namespace: `ls -l`, `pwd`,
    `cd ..`, `who` run as %ls -l, %pwd, ... when the first word names a line magic or a shell alias that can
    run here (pyc's own, or IPython's when IPython is installed), it is not followed by `=` or `,` (an
    assignment), and no variable, builtin or keyword of that name shadows it (IPython's AutoMagicChecker).
 4. If the cell now parses as Python (top-level await allowed), it is returned: plain Python is never
    altered.  Otherwise the lines that begin a statement and start (after their indentation) with one of
    IPython's escapes, or end with `?` / `??` outside strings and comments, are rewritten:

    !cmd                 ->  __import__('pyc._magics')._magics.system('cmd')
    x = !cmd, !!cmd      ->  x = ...getoutput('cmd')
    %name args           ->  ...line_magic('name', 'args')        (x = %name args as well)
    %%name args + body   ->  ...cell_magic('name', 'args', 'body')  (first line of the cell only)
    obj?, obj??, ?obj    ->  ...page('obj', 0 or 1)                (a*b*? searches names: %psearch)
    ,f a b               ->  f("a", "b")                           (IPython's quoting escapes, and
    ;f a b               ->  f("a b")                               its call without parentheses)
    /f a b               ->  f(a, b)

The kernel (src/py/exec.c) calls transform_cell for a cell that does not parse, and before compiling a cell
that may be pasted prompts or an automagic line (ipyinput.c decides from the text alone, and from the names
in _pyc.automagic_names, without calling Python for any other cell).

Every step keeps the cell's lines where they are: each rewritten line keeps its line number (lines that a
magic swallows -- backslash continuations, a %%magic's body -- become empty), so a traceback's line numbers
match the cell as typed.  If the rewritten
cell still does not parse and the error is on a rewritten line, the original cell is returned, so that the
user sees the SyntaxError of what they typed rather than of generated code; an error on a line that was
not rewritten is a genuine one and is reported from the rewritten cell (same line, same text).
"""

import keyword
import re

from ._source import STRING_BODY, TOKEN

# ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, without importing ast: parsing is enough to tell
# plain Python (every IPython-style line is a syntax error for the parser).
_PARSE_FLAGS = 0x400 | 0x2000

_CALL = "__import__('pyc._magics')._magics."

_MAGIC = re.compile(r"%(%?)([A-Za-z_]\w*)(.*)\Z", re.S)
_ASSIGN = re.compile(r"([\w.]+(?:\s*,\s*[\w.]+)*)\s*=\s*([!%])(.*)\Z", re.S)


def _error_line(code):
    """None if code parses, else the line number of its SyntaxError (0 when unknown)."""
    try:
        compile(code, "<cell>", "exec", _PARSE_FLAGS, dont_inherit=True)
    except SyntaxError as e:
        return e.lineno or 0
    except (ValueError, OverflowError, MemoryError, RecursionError):
        return None  # not something a transform can help with: let the kernel report it
    return None


# IPython's prompts (IPython.core.inputtransformer2: classic_prompt, ipython_prompt).
_CLASSIC_FIRST = re.compile(r"^>>>( |$)")
_CLASSIC = re.compile(r"^(>>>|\.\.\.)( |$)")
_IPYTHON = re.compile(r"^(((\[nav\]|\[ins\])? )?In \[\d+\]: |\s*\.{3,}: ?)")
_INDENT = re.compile(r"^[ \t]+")
# IPython's split of a line into indentation, escape, the name it calls, and the rest (splitinput.line_split).
_LINE_SPLIT = re.compile(r"^(\s*)([,;/%]|!!?|\?\??)?\s*(%{0,2}[\w\.\*]*)(.*?$|$)")


def transform_cell(code, namespace=None):
    """code unchanged if it is plain Python; otherwise code as IPython would run it (see the module's text),
    or unchanged when the rewriting would only trade the user's SyntaxError for one in generated code."""
    if not isinstance(code, str):
        return code
    try:
        lines = code.split("\n")
        first = _first_code_line(lines)
        if _INDENT.match(lines[first]) and _error_line(code) is not None:
            lines = _dedent(lines, first).split("\n")
        cleaned = _strip_prompts(lines, first)
        magic = _automagic(cleaned, first, namespace) if namespace is not None else None
        if magic is not None:
            cleaned[first] = magic
        cleaned = "\n".join(cleaned)
    except Exception:
        return code
    if cleaned == code:
        cleaned = code  # the caller tells "unchanged" by identity
    if _error_line(cleaned) is None:
        return cleaned
    try:
        new, changed = _transform(cleaned)
    except Exception:
        return code
    if not changed:
        return code  # still not Python: the user sees the SyntaxError of what they typed
    line = _error_line(new)
    if line is not None and (line == 0 or line in changed):
        return code
    return new


def without_prompts(code):
    """code with pasted prompts removed (step 2 alone), for is_complete_request: a console judges a pasted
    `>>> def f():` as the block it opens."""
    lines = code.split("\n")
    out = "\n".join(_strip_prompts(lines, _first_code_line(lines)))
    return code if out == code else out


def _first_code_line(lines):
    """The index of the first line that is not blank (IPython's leading_empty_lines skip them), or 0."""
    return next((k for k, ln in enumerate(lines) if ln.strip()), 0)


def _strip_prompts(lines, first):
    """lines with the pasted prompts removed (a new list), as IPython's PromptStripper: when the first line
    holds a prompt, or the second one does, each line loses its prompt."""
    for prompt, initial in ((_CLASSIC, _CLASSIC_FIRST), (_IPYTHON, _IPYTHON)):
        if initial.match(lines[first]) or (first + 1 < len(lines) and prompt.match(lines[first + 1])):
            lines = lines[:first] + [prompt.sub("", ln, count=1) for ln in lines[first:]]
    return list(lines)


def _dedent(lines, first):
    """IPython's leading_indent: the first line's indentation removed from every line that starts with it."""
    space = _INDENT.match(lines[first]).group()
    return "\n".join(ln[len(space):] if ln.startswith(space) else ln for ln in lines)


def _automagic(lines, first, namespace):
    """The automagic line (`%name rest`, for the escape transform) that replaces the cell's only line, or
    None (see the module's text, step 3)."""
    if first != len(lines) - 1 and not (first == len(lines) - 2 and lines[-1] == ""):
        return None
    m = _LINE_SPLIT.match(lines[first])
    if m is None:
        return None
    pre, esc, ifun, rest = m.group(1), m.group(2), m.group(3).strip(), m.group(4).lstrip()
    if esc or not ifun or rest[:1] in ("=", ","):
        return None
    head = ifun.split(".", 1)[0]
    if head in namespace or keyword.iskeyword(head):
        return None
    import builtins

    if hasattr(builtins, head):
        return None
    from . import _magics

    if not _magics.can_automagic(ifun):
        return None
    return pre + "%" + ifun + (" " + rest if rest else "")


def _scan_line(line, quote, depth):
    """Follows one physical line from the state at its start (quote: the string still open, or None;
    depth: open brackets).  Returns (quote, depth, code_end, backslash): the state at its end, where its
    code ends (before a comment) and whether it ends with a line-continuation backslash."""
    i = 0
    n = len(line)
    if quote is not None:
        m = STRING_BODY[quote].match(line)
        if m.group(1) is None:
            if len(quote) == 3 or line.endswith("\\"):
                return quote, depth, n, False
            return None, depth, n, False
        i = m.end()
    while i < n:
        m = TOKEN.search(line, i)
        if m is None:
            break
        tok = m.group()
        if tok == "#":
            return None, depth, m.start(), False
        if tok in "([{":
            depth += 1
            i = m.end()
        elif tok in ")]}":
            depth = max(depth - 1, 0)
            i = m.end()
        else:
            m2 = STRING_BODY[tok].match(line, m.end())
            if m2.group(1) is None:
                if len(tok) == 3 or line.endswith("\\"):
                    return tok, depth, n, False
                return None, depth, n, False  # an unterminated '...': a syntax error, ended here
            i = m2.end()
    return None, depth, n, line.endswith("\\")


def _joined(lines, i):
    """The magic line at i with its backslash continuations joined, and how many lines it spans."""
    text = lines[i]
    used = 1
    while text.endswith("\\") and i + used < len(lines):
        text = text[:-1] + lines[i + used]
        used += 1
    return text, used


def _page(target, level):
    return "%spage(%r, %d)" % (_CALL, target, level)


def _magic_call(name, args):
    return "%sline_magic(%r, %r)" % (_CALL, name, args)


def _rhs(kind, rest):
    """The expression that replaces `!cmd` / `%name args` on the right of an assignment."""
    if kind == "!":
        return "%sgetoutput(%r)" % (_CALL, rest.strip())
    m = _MAGIC.match("%" + rest)
    if m is None or m.group(1):
        return None
    return _magic_call(m.group(2), m.group(3).strip())


def _line_transform(lines, i, first):
    """The replacement of line i (a statement start) and the number of lines it takes, or None."""
    line = lines[i]
    stripped = line.lstrip()
    if not stripped:
        return None
    indent = line[: len(line) - len(stripped)]
    c = stripped[0]
    if c == "%":
        m = _MAGIC.match(stripped)
        if m is None:
            return None
        if m.group(1):  # %%name
            name, args = m.group(2), m.group(3).strip()
            if args in ("?", "??"):  # %%name? is help on the magic, as in IPython
                return indent + _page("%%" + name, len(args) - 1), 1
            if not first:
                return indent + "%scell_magic(%r, %r, None)" % (_CALL, name, args), 1
            body = "\n".join(lines[i + 1 :])
            return indent + "%scell_magic(%r, %r, %r)" % (_CALL, name, args, body), len(lines) - i
        text, used = _joined(lines, i)
        m = _MAGIC.match(text.lstrip())
        name, args = m.group(2), m.group(3).strip()
        if args.endswith("?") and not args.rstrip("?").strip():
            return indent + _page("%" + name, 1 if args.startswith("??") else 0), used
        out = _magic_call(name, args)
        if args.endswith(";"):
            out += ";"
        return indent + out, used
    if c == "!":
        text, used = _joined(lines, i)
        cmd = text.lstrip()[1:]
        if cmd.startswith("!"):
            return indent + "%sgetoutput(%r)" % (_CALL, cmd[1:].strip()), used
        return indent + "%ssystem(%r)" % (_CALL, cmd.strip()), used
    if c == "?":
        target = stripped.lstrip("?").strip()
        return indent + _page(target, 1 if stripped.startswith("??") else 0), 1
    if c in ",;/":
        text, used = _joined(lines, i)
        name, _, args = text.lstrip()[1:].partition(" ")
        if not name:
            return None
        if c == ",":
            call = '%s("%s")' % (name, '", "'.join(args.split()))
        elif c == ";":
            call = '%s("%s")' % (name, args)
        else:
            call = "%s(%s)" % (name, ", ".join(args.split()))
        return indent + call, used
    m = _ASSIGN.match(stripped)
    if m is not None:
        text, used = _joined(lines, i)
        m = _ASSIGN.match(text.lstrip())
        if m is None:
            return None
        lhs = m.group(1)
        try:
            compile(lhs + " = None", "<lhs>", "exec", _PARSE_FLAGS, dont_inherit=True)
        except SyntaxError:
            return None
        rhs = _rhs(m.group(2), m.group(3))
        if rhs is None:
            return None
        return indent + lhs + " = " + rhs, used
    return None


def _help_transform(line, code_end):
    """`obj?` / `obj??` (the code part of the line ends with ?) -> page(...), or None."""
    code = line[:code_end].rstrip()
    if not code.endswith("?"):
        return None
    stripped = code.lstrip()
    indent = code[: len(code) - len(stripped)]
    target = stripped.rstrip("?")
    level = 1 if len(stripped) - len(target) >= 2 else 0
    return indent + _page(target.strip(), level)


def _transform(code):
    """(rewritten code, set of the 1-based numbers of the lines rewritten or emptied)."""
    lines = code.split("\n")
    out = list(lines)
    changed = set()
    first = next((k for k, ln in enumerate(lines) if ln.strip()), 0)
    quote, depth, cont = None, 0, False
    i = 0
    while i < len(lines):
        line = lines[i]
        cr = line.endswith("\r")
        if cr:
            line = line[:-1]
            lines[i] = line
        at_start = quote is None and depth == 0 and not cont
        if at_start:
            r = _line_transform(lines, i, i == first)
            if r is not None:
                text, used = r
                out[i] = text + ("\r" if cr else "")
                changed.add(i + 1)
                for k in range(i + 1, i + used):
                    out[k] = ""
                    changed.add(k + 1)
                i += used
                continue
        quote, depth, end, cont = _scan_line(line, quote, depth)
        if at_start and quote is None and depth == 0 and not cont:
            r = _help_transform(line, end)
            if r is not None:
                out[i] = r + ("\r" if cr else "")
                changed.add(i + 1)
        i += 1
    return "\n".join(out), changed
