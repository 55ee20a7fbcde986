"""pyc: the Python side of the pyc Jupyter kernel, and its API for user code.

    from pyc import display, update_display, clear_output, DisplayHandle

    h = display("working...", display_id=True)   # a DisplayHandle
    h.update("done")                              # replaces that output in place
    clear_output(wait=True)                       # clears the cell's output (at the next output if wait)

display() publishes each object as display_data with the kernel's formatting (text/plain plus the IPython
_repr_*_ protocol: _repr_html_, _repr_png_, _repr_mimebundle_, ...); raw=True publishes dicts as MIME
bundles as they are.  The work is done by _pyc, the kernel's built-in C module; this package only adds the
display ids.  Its other modules serve the kernel (completion, inspection, cell transforms and magics, the
matplotlib backend) and are imported when first needed, so `import pyc` is cheap.
"""

__all__ = ["display", "update_display", "clear_output", "DisplayHandle"]


def _hook_getpass(module):
    """Run by the boot finder right after getpass is first imported (and by the kernel at start when it
    already was): getpass.getpass asks the frontend, over stdin, as input() does."""
    import _pyc

    module.getpass = _pyc.getpass


def _new_display_id():
    import uuid

    return uuid.uuid4().hex


def display(*objs, metadata=None, transient=None, display_id=None, raw=False, clear=False):
    """Publishes objs as rich output (display_data), each as its own output.

    metadata: a dict merged into each output's metadata; transient: the message's transient dict;
    display_id: True for a new id, or a str to reuse one, so that the output can be updated later;
    raw: objs are MIME-bundle dicts ({"text/html": ..., "text/plain": ...}) to publish as they are;
    clear: clear the cell's output first (when the new output arrives).
    Returns a DisplayHandle when display_id is given, else None."""
    import _pyc

    if display_id is True:
        display_id = _new_display_id()
    if clear:
        _pyc.clear_output(wait=True)
    if objs:
        _pyc.display(*objs, metadata=metadata, transient=transient, display_id=display_id, raw=raw)
    if display_id is not None and display_id is not False:
        return DisplayHandle(display_id)
    return None


def update_display(obj, *, display_id, metadata=None, raw=False):
    """Replaces the outputs published with display_id by obj (update_display_data)."""
    import _pyc

    _pyc.update_display(obj, display_id=display_id, metadata=metadata, raw=raw)


def clear_output(wait=False):
    """Clears the output of the running cell; with wait=True, only when the next output arrives (no
    flicker when the output is replaced in a loop)."""
    import _pyc

    _pyc.clear_output(wait=wait)


class DisplayHandle:
    """A handle on outputs that share a display id: .display(obj) publishes one more, .update(obj)
    replaces them all."""

    def __init__(self, display_id=None):
        self.display_id = display_id if display_id is not None else _new_display_id()

    def __repr__(self):
        return "<%s display_id=%s>" % (type(self).__name__, self.display_id)

    def display(self, obj, **kwargs):
        """Publishes obj with this handle's display id."""
        display(obj, display_id=self.display_id, **kwargs)

    def update(self, obj, **kwargs):
        """Replaces the outputs with this handle's display id by obj."""
        update_display(obj, display_id=self.display_id, **kwargs)
