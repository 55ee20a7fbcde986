"""Help in a cell: `obj?`, `obj??`, `?obj`, `*pattern*?`, `%magic?` and the %pinfo, %pinfo2, %psearch,
%quickref, %magic and %lsmagic magics, shown as IPython's pager shows them in Jupyter: as a "page" payload of
the execute_reply (JupyterLab shows it in its pager area; nbconvert drops it), never on stdout.

  obj? / obj??       pyc._inspect's text about obj: signature and docstring, or its source
  %name? / %name??   the magic's documentation: pyc's own magics here; IPython's (when IPython is installed)
                     through its shell, whose pager pyc._ipython turns into the same payload
  a*b*? [type]       the names matching the wildcard pattern in the cell's namespace and the builtins, one
                     per line, as IPython's %psearch lists them (-a: names with a leading '_' too; -i: any
                     case; a dotted pattern, os.*path*, searches attributes)

The expression is evaluated without calling anything (pyc._source.guarded_eval, static): a property or a
function call in it is never run by help.  A name that does not evaluate prints IPython's sentence,
"Object `name` not found.", on stdout, as IPython does.
"""

import re
import sys

HELP = """pyc -- a Jupyter kernel for Python, written in C (no IPython inside).

Besides Python, a cell accepts these IPython-style lines:
  !cmd               run cmd with the shell; {expr} and $name are expanded
  x = !cmd           the output's lines, as a list (also !!cmd)
  obj?   obj??       help on obj: signature and docstring (?) or source (??)
  a*b*?              the names matching a wildcard pattern (%psearch)
  %magic?            a magic's documentation; %lsmagic lists the magics
  ls, cd, pwd ...    a magic or shell alias named alone on a one-line cell runs as if %-prefixed
                     (automagic), unless a variable of that name exists
  >>> / In [1]:      pasted prompts of Python and IPython sessions are removed
  %cd [dir]          change the working directory (-: the previous one; none: home)
  %pwd               the working directory
  %env [NAME[=VALUE]]  list, read or set environment variables
  %matplotlib inline figures appear as PNG images (the default)
  %time stmt         run stmt once and print its CPU and wall times
  %timeit stmt       time stmt over many loops (-n N loops, -r R runs, -q quiet, -o return the result)
  %%time, %%timeit   the same for the whole cell, on its first line (%%timeit: setup code on that line)
  %%bash, %%script PROG, %%python3 ...   the cell as a script of that program
  %connect_info      how to connect another client (jupyter console --existing) to this kernel
Rich output: display(obj), pyc.update_display(obj, display_id=...), pyc.clear_output().
"""


def show(text):
    """Sends text to the pager: a "page" payload of the current execute_reply."""
    import _pyc

    _pyc.add_payload({"source": "page", "data": {"text/plain": text}, "start": 0})


def _not_found(target):
    print("Object `%s` not found." % target)


def _magic_doc(target, detail_level):
    """The pager text of %name / %%name: pyc's own magic's docstring, or IPython's help on its magic (which
    pages through the shell); False when there is no such magic."""
    import inspect as std

    from . import _magics

    cell = target.startswith("%%")
    name = target.lstrip("%")
    fn = _magics.own_magic(name, cell)
    if fn is not None:
        show("%s\n\n%s\n" % (target, std.cleandoc(fn.__doc__ or "")))
        return True
    shell = _magics.ipython_shell_if_installed()
    if shell is None or shell.find_magic(name, "cell" if cell else "line") is None:
        return False
    shell.run_line_magic("pinfo2" if detail_level else "pinfo", target)
    return True


def page(target, detail_level=0, frame=None):
    """obj? / obj?? / *pattern*? / %magic?: the help about target in the pager (see the module's text).
    Called by the lines pyc._transform rewrites, from the cell's frame (or given the cell's frame)."""
    if frame is None:
        frame = sys._getframe(1)
    target = target.strip()
    if not target:
        show(HELP)
    elif "*" in target and not detail_level:
        psearch(target, _namespace(frame))
    elif target.startswith("%"):
        if not _magic_doc(target, detail_level):
            _not_found(target)
    else:
        from . import _inspect, _source

        try:
            obj = _source.guarded_eval(target, _namespace(frame), static=True)
        except Exception:
            _not_found(target)
            return None
        show(_inspect.describe(obj, target, detail_level))
    return None


def _namespace(frame):
    """The names the cell's frame sees (pyc._magics' view of it)."""
    from ._magics import _merged

    return _merged(frame)


# ---- %psearch ---------------------------------------------------------------------------------------------


def _type_matches(obj, type_name):
    """IPython's type filter of %psearch: 'all', or the lower-case name of a type of the types module
    without its 'Type' ending (function, module, builtinfunction, ...), or of a builtin type (int, str)."""
    if type_name == "all":
        return True
    import builtins
    import types

    t = next((getattr(types, name) for name in dir(types)
              if name.endswith("Type") and name[:-4].lower() == type_name), None)
    if t is None:
        t = getattr(builtins, type_name, None)
    return isinstance(t, type) and isinstance(obj, t)


def _visible(name, show_all):
    """IPython hides names with one leading underscore unless -a is given; dunder names are shown."""
    return show_all or name.startswith("__") or not name.startswith("_")


def _matching(namespace, pattern, type_name, ignore_case, show_all):
    """{name: obj} of namespace matching the dotted wildcard pattern (as IPython.utils.wildcard)."""
    head, _, rest = pattern.partition(".")
    regex = re.compile(re.escape(head).replace(r"\*", ".*").replace(r"\?", ".") + r"\Z", re.I if ignore_case else 0)
    found = {}
    for name, obj in list(namespace.items()):
        if not isinstance(name, str) or not regex.match(name) or not _visible(name, show_all):
            continue
        if rest:
            attrs = {}
            for attr in dir(obj):
                try:
                    attrs[attr] = getattr(obj, attr)
                except Exception:
                    continue
            for inner, value in _matching(attrs, rest, type_name, ignore_case, show_all).items():
                found["%s.%s" % (name, inner)] = value
        elif _type_matches(obj, type_name):
            found[name] = obj
    return found


def psearch(line, namespace):
    """%psearch [-a] [-i] PATTERN [TYPE]: the names matching PATTERN (wildcards * and ?) in the namespace
    and the builtins, sorted, one per line, in the pager."""
    import builtins

    from ._magics import UsageError

    words = line.split()
    show_all = "-a" in words
    ignore_case = "-i" in words
    words = [w for w in words if w not in ("-a", "-i", "-c")]
    if not words or len(words) > 2:
        raise UsageError("%%psearch: give a pattern and at most a type: %psearch a*b* [function]")
    pattern = words[0].rstrip("?") if words[0].endswith("?") and "*" in words[0] else words[0]
    type_name = words[1].lower() if len(words) == 2 else "all"
    names = set()
    for ns in (namespace, vars(builtins)):
        names.update(_matching(ns, pattern, type_name, ignore_case, show_all))
    show("\n".join(sorted(names)))
    return None


# ---- the magics -------------------------------------------------------------------------------------------


def magic_pinfo(line, frame):
    """Help on an object (the same as obj?): its signature and docstring, in the pager."""
    return page(line, 0, frame)


def magic_pinfo2(line, frame):
    """More help on an object (the same as obj??): its source when there is some, in the pager."""
    return page(line, 1, frame)


def magic_psearch(line, frame):
    """Search for names by wildcard: %psearch [-a] [-i] PATTERN [TYPE] (the same as PATTERN?).  Lists the
    matching names of the namespace and the builtins in the pager; -a includes names that start with '_', -i
    ignores case, TYPE keeps objects of that type (function, module, int, ...), a dotted pattern (os.*path*)
    searches attributes."""
    return psearch(line, _namespace(frame))


def magic_quickref(line, frame):
    """A quick reference of what a cell accepts besides Python, in the pager."""
    show(HELP)


def _all_magics():
    from . import _magics

    return _magics.own_magic_names()


def magic_lsmagic(line, frame):
    """The magics pyc runs by itself (IPython's join them when IPython is installed)."""
    lines, cells = _all_magics()
    print("Available line magics:\n%s\n\nAvailable cell magics:\n%s\n\nAutomagic is ON, % prefix IS NOT needed "
          "for line magics." % ("  ".join("%" + n for n in lines), "  ".join("%%" + n for n in cells)))


def magic_magic(line, frame):
    """Information about the magic function system: the quick reference and the list of magics, in the pager."""
    lines, cells = _all_magics()
    show(HELP + "\nLine magics: %s\nCell magics: %s\n" % (" ".join("%" + n for n in lines),
                                                           " ".join("%%" + n for n in cells)))
