"""The matplotlib backend of the pyc kernel: figures appear in the notebook as PNG images.

Selected with MPLBACKEND=module://pyc.mpl_backend (the kernel sets it unless MPLBACKEND is set) or
`%matplotlib inline`.  It renders with Agg, like matplotlib_inline's backend in ipykernel:

  * plt.show() publishes every open figure as display_data and closes them;
  * fig.show() publishes that figure;
  * flush_figures(), which the kernel calls after each cell, publishes the figures still open -- made by
    the cell and not shown -- and closes them, so each cell shows its own figures once.  Figures the user
    closed are not shown, nor figures already shown and not changed since (show(), display(fig), fig as
    a cell's value);
  * a Figure displays as PNG (display(fig), or fig as a cell's value) through Figure._repr_png_, which
    this module adds when matplotlib has none.

An output's data is {"image/png": base64, "text/plain": "<Figure size 640x480 with 1 Axes>"} and its
metadata {"image/png": {"width": w, "height": h}} (pixels).  Empty figures (no Axes) are not shown, as in
IPython.  Module-level names that matplotlib looks for: FigureCanvas, FigureManager, show,
new_figure_manager and new_figure_manager_given_figure (the last two for matplotlib before 3.6).
"""

import matplotlib
from matplotlib._pylab_helpers import Gcf
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

BACKEND = "module://pyc.mpl_backend"
backend_version = "pyc"


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
    # Shown in this state: flush_figures skips it until an artist changes (which makes it stale again;
    # print_figure with bbox_inches="tight" leaves it stale although it has just been drawn).
    fig._pyc_shown = True
    fig.stale = False
    return data, width, height


def _display_figure(fig):
    """Publishes fig as image/png display_data; False if there was nothing to show."""
    r = _png(fig)
    if r is None:
        return False
    import base64

    import _pyc

    data, width, height = r
    bundle = {"image/png": base64.b64encode(data).decode("ascii"), "text/plain": repr(fig)}
    _pyc.display(bundle, metadata={"image/png": {"width": width, "height": height}}, raw=True)
    return True


def _repr_png_(self):
    """The figure as PNG for display(fig) and for a cell's value: (bytes, {"width", "height"})."""
    r = _png(self)
    if r is None:
        return None
    data, width, height = r
    return data, {"width": width, "height": height}


if not hasattr(Figure, "_repr_png_"):
    Figure._repr_png_ = _repr_png_


class FigureManager(FigureManagerBase):
    """Agg figure manager whose show() (fig.show()) publishes the figure."""

    def show(self):
        _display_figure(self.canvas.figure)


class FigureCanvas(FigureCanvasAgg):
    """Agg canvas whose figures get pyc's FigureManager."""

    manager_class = FigureManager


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
    """Called by the kernel after each cell: publishes the open figures that have not been shown in their
    current state, then closes all figures.  Does nothing when another backend is in use.  Errors while
    rendering are printed to stderr, not raised."""
    if not _is_active():
        return
    managers = Gcf.get_all_fig_managers()
    if not managers:
        return
    try:
        for manager in managers:
            fig = manager.canvas.figure
            if getattr(fig, "_pyc_shown", False) and not fig.stale:
                continue
            try:
                _display_figure(fig)
            except Exception as e:
                _report(e)
    finally:
        _close_all()
