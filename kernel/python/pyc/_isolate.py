"""Fork-isolated cells: what the child sends back and how the parent takes it in.

The kernel forks a child for a cell whose execute_request asks for isolation (metadata
{"pyc": {"isolate": "fork", "timeout": S}} or a first line `%%isolate [S]`).  In the child, snapshot() runs
before the cell and collect() after it: every name the cell bound (new, or now naming another object) is
pickled on its own, so one unpicklable value skips only that name, with the reason.  The parent merges the
names with merge() (last writer wins).  A cell that mutates an object in place without rebinding its name
changes nothing in the parent: the child's memory is its own.  The names the kernel binds itself for every
cell (_, _N, _iN, ...) are not sent back.
"""

import pickle
import sys
import types

from pyc._shell import is_kernel_name

_before = None


def _namespace():
    return sys.modules["__main__"].__dict__


def snapshot():
    global _before
    _before = {name: id(value) for name, value in _namespace().items()}


def collect():
    """Returns (pickled dict of name -> pickle, merged names, {skipped name: reason})."""
    before = _before or {}
    changed, skipped = {}, {}
    for name, value in list(_namespace().items()):
        if name.startswith("__") or is_kernel_name(name) or (name in before and before[name] == id(value)):
            continue
        if isinstance(value, types.ModuleType):
            skipped[name] = "a module (import it in the kernel itself)"
            continue
        try:
            data = pickle.dumps(value, protocol=5)
            pickle.loads(data)  # a class or function defined in the cell pickles but loads only here
        except Exception as e:
            skipped[name] = "%s: %s" % (type(e).__name__, e)
            continue
        changed[name] = data
    return pickle.dumps(changed, protocol=5), sorted(changed), skipped


def merge(blob):
    """Binds the names of a collect() result in the kernel's namespace; returns (merged, skipped)."""
    ns = _namespace()
    merged, skipped = [], {}
    for name, data in pickle.loads(blob).items():
        try:
            ns[name] = pickle.loads(data)
            merged.append(name)
        except Exception as e:
            skipped[name] = "%s: %s" % (type(e).__name__, e)
    return merged, skipped
