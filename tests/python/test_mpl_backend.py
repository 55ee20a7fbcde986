"""pyc.mpl_backend: figures published as PNG display_data (MPLBACKEND=module://pyc.mpl_backend)."""

import base64
import struct
import zlib

import pytest

matplotlib = pytest.importorskip("matplotlib")

from conftest import run_cell  # noqa: E402


@pytest.fixture
def plt(fake_pyc):
    import matplotlib.pyplot as plt

    from pyc import mpl_backend

    assert matplotlib.get_backend() == mpl_backend.BACKEND
    plt.close("all")
    yield plt
    plt.close("all")


def _flush():
    from pyc import mpl_backend

    mpl_backend.flush_figures()


def _png_size(data):
    """(width, height) of a PNG, after checking its signature and the CRC of every chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    i = 8
    size = None
    chunks = []
    while i < len(data):
        (length,) = struct.unpack(">I", data[i : i + 4])
        kind = data[i + 4 : i + 8]
        body = data[i + 8 : i + 8 + length]
        (crc,) = struct.unpack(">I", data[i + 8 + length : i + 12 + length])
        assert zlib.crc32(kind + body) == crc
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        chunks.append(kind)
        i += 12 + length
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND" and b"IDAT" in chunks
    return size


def _published(fake_pyc):
    out = []
    for name, objs, kw in fake_pyc.named("display"):
        assert kw["raw"] is True
        (bundle,) = objs
        assert set(bundle) in ({"image/png", "text/plain"}, {"text/plain"})
        out.append((bundle, kw["metadata"]))
    return out


def test_module_names_matplotlib_expects():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from pyc import mpl_backend

    assert issubclass(mpl_backend.FigureCanvas, FigureCanvasAgg)
    for name in ("FigureManager", "show", "new_figure_manager", "new_figure_manager_given_figure", "flush_figures"):
        assert callable(getattr(mpl_backend, name))


def test_flush_publishes_one_png(plt, fake_pyc):
    fig = plt.figure(figsize=(4, 3), dpi=50)
    plt.plot([1, 3, 2])
    _flush()
    ((bundle, md),) = _published(fake_pyc)
    png = base64.b64decode(bundle["image/png"], validate=True)
    width, height = _png_size(png)
    assert md == {"image/png": {"width": width, "height": height}}
    # bbox_inches="tight" trims the 200x150 canvas a little
    assert 150 <= width <= 200 and 100 <= height <= 150
    assert bundle["text/plain"] == "<Figure size 200x150 with 1 Axes>"
    assert plt.get_fignums() == []  # closed after the cell
    assert fig is not None


def test_flush_in_a_cell_after_plotting(plt, fake_pyc):
    ns = {}
    run_cell("import matplotlib.pyplot as plt\nfig, axes = plt.subplots(1, 2)\naxes[0].plot([1, 2])", ns)
    _flush()
    assert len(_published(fake_pyc)) == 1
    _flush()
    assert len(_published(fake_pyc)) == 1  # nothing new


def test_closed_figure_is_not_shown(plt, fake_pyc):
    fig = plt.figure()
    plt.plot([1])
    plt.close(fig)
    _flush()
    assert _published(fake_pyc) == []


def test_show_then_flush_shows_nothing_more(plt, fake_pyc):
    plt.plot([1, 2])
    plt.figure()
    plt.plot([2, 1])
    plt.show()
    assert len(_published(fake_pyc)) == 2
    assert plt.get_fignums() == []
    _flush()
    assert len(_published(fake_pyc)) == 2


def test_empty_figure_is_shown_as_text(plt, fake_pyc):
    # As matplotlib-inline: a figure pyplot made is shown when the cell ends; with no Axes it has no image.
    plt.figure()
    _flush()
    assert _published(fake_pyc) == [({"text/plain": "<Figure size 640x480 with 0 Axes>"}, {})]


def test_after_ioff_figures_wait_for_show(plt, fake_pyc):
    plt.ioff()
    try:
        plt.plot([1, 2])
        _flush()
        assert _published(fake_pyc) == [] and plt.get_fignums() == [1]
        plt.show()
        assert len(_published(fake_pyc)) == 1 and plt.get_fignums() == []
    finally:
        plt.ion()


def test_figure_show_method(plt, fake_pyc):
    fig, ax = plt.subplots()
    ax.plot([1, 2])
    fig.show()
    assert len(_published(fake_pyc)) == 1
    _flush()  # still open at the end of the cell: shown again, as ipykernel's inline backend does
    assert len(_published(fake_pyc)) == 2
    _flush()  # and closed
    assert len(_published(fake_pyc)) == 2


def test_figure_changed_after_show_is_shown_again(plt, fake_pyc):
    fig, ax = plt.subplots()
    ax.plot([1, 2])
    fig.show()
    ax.set_title("more")
    _flush()
    assert len(_published(fake_pyc)) == 2


def test_figure_repr_png(plt, fake_pyc):
    fig, ax = plt.subplots(figsize=(2, 2), dpi=40)
    ax.plot([1, 2])
    data, md = fig._repr_png_()
    assert _png_size(data) == (md["width"], md["height"])
    _flush()  # the cell's value, and still open when it ends: shown again, as in ipykernel
    assert [d["image/png"] for d, _ in _published(fake_pyc)] == [__import__("base64").b64encode(data).decode()]


def test_other_backend_is_left_alone(plt, fake_pyc):
    plt.switch_backend("agg")
    try:
        plt.plot([1])
        _flush()
        assert _published(fake_pyc) == []
        assert plt.get_fignums() == [1]
    finally:
        plt.close("all")
        plt.switch_backend("module://pyc.mpl_backend")


def test_rendering_error_is_reported_not_raised(plt, fake_pyc, capsys, monkeypatch):
    from pyc import mpl_backend

    plt.plot([1])

    def boom(fig):
        raise ValueError("cannot render")

    monkeypatch.setattr(mpl_backend, "_png", boom)
    _flush()
    assert "ValueError: cannot render" in capsys.readouterr().err
    assert plt.get_fignums() == []
