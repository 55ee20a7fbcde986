"""The matplotlib backend of the pyc kernel: figures appear in the notebook as PNG images.

Selected with MPLBACKEND=module://pyc.mpl_backend (the kernel sets it unless MPLBACKEND is set) or
`%matplotlib inline`.  It renders with Agg, like matplotlib_inline's backend in ipykernel:

  * plt.show() publishes every open figure as display_data and closes them;
  * fig.show() publishes that figure;
  * flush_figures(), which the kernel calls after each cell, follows matplotlib-inline's rules (ipykernel's
    backend): when pyplot made a figure in interactive mode during the cell, every figure still open is
    published and all are closed -- so a figure that was also the cell's value, or display()ed, shows
    again, as in ipykernel, and `plt.figure()` alone shows `<Figure size 640x480 with 0 Axes>`; after
    plt.ioff() nothing is shown until plt.show(), and the figures stay open;
  * a Figure displays as PNG (display(fig), or fig as a cell's value) through Figure._repr_png_, which
    this module adds when matplotlib has none.

An output's data is {"image/png": base64, "text/plain": "<Figure size 640x480 with 1 Axes>"} and its
metadata {"image/png": {"width": w, "height": h}} (pixels); an empty figure (no Axes) has text/plain only,
as IPython's formatters give it.  When pyc hosts an IPython shell, figures are published through its display
publisher, so that %%capture keeps them (and the shell's post_execute, which a nested run_cell fires, flushes
them there).  Module-level names that matplotlib looks for: FigureCanvas, FigureManager, show,
new_figure_manager and new_figure_manager_given_figure (the last two for matplotlib before 3.6).
"""

import matplotlib
from matplotlib._pylab_helpers import Gcf
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

BACKEND = "module://pyc.mpl_backend"
backend_version = "pyc"

# As IPython's activate_matplotlib does when ipykernel's inline backend loads: pyplot in interactive mode,
# so that a figure made by pyplot is shown at the end of its cell (flush_figures), and plt.ioff() stops that.
matplotlib.interactive(True)


def _png(fig):
    """(png bytes, width, height) of fig rendered as the inline backend does, or None for an empty fig."""
    if not fig.axes and not fig.lines:
        return None
    import io
    import struct

    buf = io.BytesIO()
    fig.canvas.print_figure(
        buf,
        format="png",
        facecolor=fig.get_facecolor(),
        edgecolor=fig.get_edgecolor(),
        dpi=fig.dpi,
        bbox_inches="tight",
    )
    data = buf.getvalue()
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    return data, width, height


def _display_figure(fig):
    """Publishes fig as display_data: image/png and text/plain, or text/plain alone for an empty figure."""
    import base64

    import _pyc

    from pyc import _shell

    r = _png(fig)
    bundle, metadata = {"text/plain": repr(fig)}, {}
    if r is not None:
        data, width, height = r
        bundle["image/png"] = base64.b64encode(data).decode("ascii")
        metadata = {"image/png": {"width": width, "height": height}}
    if _shell.host is not None:
        _shell.host.display_pub.publish(data=bundle, metadata=metadata)
    else:
        _pyc.display(bundle, metadata=metadata, raw=True)


def _repr_png_(self):
    """The figure as PNG for display(fig) and for a cell's value: (bytes, {"width", "height"})."""
    r = _png(self)
    if r is None:
        return None
    data, width, height = r
    return data, {"width": width, "height": height}


if not hasattr(Figure, "_repr_png_"):
    Figure._repr_png_ = _repr_png_


# Set when pyplot makes a figure in interactive mode (matplotlib-inline's show._draw_called): the cell's
# figures are then published when it ends.
_drawn = [False]


class FigureManager(FigureManagerBase):
    """Agg figure manager whose show() (fig.show()) publishes the figure."""

    def __init__(self, canvas, num):
        super().__init__(canvas, num)
        if matplotlib.is_interactive():
            _drawn[0] = True

    def show(self):
        _display_figure(self.canvas.figure)


class FigureCanvas(FigureCanvasAgg):
    """Agg canvas whose figures get pyc's FigureManager."""

    manager_class = FigureManager

    def draw_idle(self, *args, **kwargs):
        """Nothing: an inline figure is drawn when it is shown.  Interactive mode asks for it on every change
        of an artist (pyplot's stale callback, without IPython), where Agg would render the whole figure
        each time."""


def new_figure_manager(num, *args, FigureClass=Figure, **kwargs):
    """A manager for a new figure (the backend API of matplotlib before 3.6)."""
    return new_figure_manager_given_figure(num, FigureClass(*args, **kwargs))


def new_figure_manager_given_figure(num, figure):
    """A manager for figure (the backend API of matplotlib before 3.6)."""
    if hasattr(FigureCanvas, "new_manager"):
        return FigureCanvas.new_manager(figure, num)
    return FigureManager(FigureCanvas(figure), num)


def _close_all():
    import sys

    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")
    else:
        Gcf.destroy_all()


def _report(exc):
    import sys
    import traceback

    sys.stderr.write("pyc.mpl_backend: a figure could not be shown:\n")
    sys.stderr.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))


def show(close=None, block=None):
    """plt.show(): publishes every open figure, then closes them (block is accepted and ignored; close=False
    keeps them open)."""
    try:
        for manager in Gcf.get_all_fig_managers():
            _display_figure(manager.canvas.figure)
    finally:
        if close is not False and Gcf.get_all_fig_managers():
            _close_all()


def _is_active():
    try:
        backend = dict.__getitem__(matplotlib.rcParams, "backend")
    except Exception:
        return False
    return isinstance(backend, str) and backend.lower() == BACKEND


def flush_figures():
    """Called by the kernel after each cell (and by the shell's post_execute): when pyplot made a figure in
    interactive mode since the last call, publishes every open figure, then closes them all.  Does nothing
    when another backend is in use.  Errors while rendering are printed to stderr, not raised."""
    if not _drawn[0] or not _is_active():
        return
    _drawn[0] = False
    managers = Gcf.get_all_fig_managers()
    if not managers:
        return
    try:
        for manager in managers:
            try:
                _display_figure(manager.canvas.figure)
            except Exception as e:
                _report(e)
    finally:
        _close_all()
