"""The Jupyter Notebook page in headless Chromium, driven by playwright-core (tests/clients/browser): the
classic Notebook 6 (Debian 12 and 13) through notebook.mjs, Notebook 7 (Debian testing; JupyterLab's user
interface, on jupyter_server) through lab.mjs.

One notebook server and one browser run per module: the node script opens a notebook whose kernelspec is
`pyc`, runs its cells one by one with Shift+Enter (each to its end, so that a failing cell does not abort
the next ones), answers the input() prompt by typing into the box, reads what the page shows for each cell
and saves a full-page screenshot; the tests below check that page: print, a DataFrame's table, a plot's
image, a traceback, input(), an ipywidgets slider that Python moves, tqdm's bar, plotly, sympy's math and
a rich table.

Notebook 7 runs without its cell toolbar (NOTEBOOK7_SETTINGS says why), with plotly's "iframe" renderer
when plotly's JupyterLab extension is missing (as in Debian), and its widget tests are expected failures
while Debian's ipywidgets extension lacks ipywidgets' stylesheet (webserver.widgets_labextension).

Needs Debian's jupyter-notebook and chromium, and `npm ci` in tests/clients/browser (.ci/deps does both).
Without them the tests skip, except in CI (CI=true) where they fail.  The screenshot goes to
$PYC_ARTIFACTS_DIR (default: <pytest tmp dir>/artifacts).
"""

import importlib.metadata
import importlib.util
import os
import re
import secrets

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from pyctest import IS_PYC, PYC_PYTHON, env_root
from webserver import (
    CHROMIUM,
    Watched,
    artifacts_dir,
    check_widget,
    free_port,
    lab_env,
    require,
    require_browser,
    run_driver,
    start_jupyter,
    widgets_labextension,
)


def _major(dist):
    try:
        return int(importlib.metadata.version(dist).split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


#: The Notebook's major version: 6 is the classic page (notebook.mjs), 7 JupyterLab's (lab.mjs).
NOTEBOOK_MAJOR = _major("notebook")
CLASSIC = NOTEBOOK_MAJOR is not None and NOTEBOOK_MAJOR < 7

#: Notebook 7's settings beyond webserver.LAB_SETTINGS.  Debian's Notebook 7.4.7 page (not its JupyterLab
#: 4.4.10) recurses without end in its toolkit's design tokens (@jupyter/web-components on
#: @microsoft/fast-foundation) each time a jp-toolbar is attached: "RangeError: Maximum call stack size
#: exceeded" in Toolbar.connectedCallback -> fillColor.setValueFor -> Store.set -> notify -> Store.set ...
#: With every cell in the DOM, the cell toolbar that follows the active cell makes tens of thousands of
#: them, and the page stalls for minutes on a loaded machine; without the cell toolbar there are a few
#: hundred, as with Notebook 7's default windowing.
NOTEBOOK7_SETTINGS = {"@jupyterlab/cell-toolbar-extension/plugin": {"showToolbar": False}}

#: Notebook 7 draws ipywidgets through JupyterLab's extension: whether it has ipywidgets' stylesheet (None
#: for Notebook 6, whose nbextension has it).
WIDGETS_CSS = None if CLASSIC or NOTEBOOK_MAJOR is None else widgets_labextension()


def plotly_labextension():
    """True when plotly's JupyterLab extension (its mimetype renderer) is installed.  pip's plotly has it;
    Debian's python3-plotly does not, and no Debian package does: there plotly's default renderer in
    Notebook 7 and JupyterLab is a text/html output that needs the classic Notebook's requirejs, and shows
    nothing (whatever the kernel)."""
    from jupyter_core.paths import jupyter_path

    return any(os.path.isdir(os.path.join(d, "jupyterlab-plotly")) for d in jupyter_path("labextensions"))

ANSWER = "pyc tester"
PRINTED = "Hello from the browser!"
PROMPT = "Your name? "

CELLS = [
    ("print", 'print("%s")' % PRINTED, {}),
    (
        "dataframe",
        'import pandas as pd\ndf = pd.DataFrame({"name": ["alpha", "beta", "gamma"], "value": [1, 22, 333]})\ndf',
        {},
    ),
    (
        "plot",
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots(figsize=(4, 2.5))\n"
        'ax.plot([0, 1, 2, 3], [0, 1, 4, 9], marker="o")\n'
        'ax.set_title("squares")\n'
        "plt.show()",
        {},
    ),
    # raises-exception: the Notebook sends stop_on_error=false, so the cells after it still run
    ("error", "1 / 0", {"tags": ["raises-exception"]}),
    ("input", 'answer = input("%s")\nprint("Hello, " + answer + "!")' % PROMPT, {}),
    # The libraries of issue 10, which find IPython's shell in pyc (imported on first use, not at start).
    # ipywidgets 6's page code (Debian 12) asks the kernel for its version once, when it connects: before
    # ipywidgets is imported nobody answers, so the page reconnects after this cell ("Reconnecting the current
    # kernel may help", as ipywidgets itself says; the same with ipykernel).  ipywidgets 8 needs no such step.
    ("widgets", "import ipywidgets", {"reconnect": True}),
    ("slider", "slider = ipywidgets.IntSlider(value=3, max=10, description='knob')\nslider", {}),
    ("slider_move", "slider.value = 8", {}),
    (
        "tqdm",
        "import tqdm.notebook\n"
        "if ipywidgets.__version__.startswith('6.'):\n"
        "    # Debian 12's tqdm 4.64 colours its bar through a style that ipywidgets 6 lacks (ipykernel fails\n"
        "    # the same way); without colours the bar is tqdm's own notebook bar.\n"
        "    tqdm.notebook.tqdm_notebook.colour = property(lambda self: None, lambda self, value: None)\n"
        "from tqdm.auto import tqdm\n"
        "for i in tqdm(range(40), desc='counting'):\n    pass",
        {},
    ),
    ("plotly", "import plotly.graph_objects as go\ngo.Figure(go.Bar(x=['a', 'b', 'c'], y=[2, 1, 3])).show()", {}),
    ("sympy", "import sympy\nsympy.init_printing()\nx = sympy.Symbol('x')\nsympy.Integral(sympy.sqrt(1 / x), x)", {}),
    (
        "rich",
        "from rich.table import Table\nimport rich\ntable = Table('planet', 'moons')\n"
        "table.add_row('Mars', '2')\ntable.add_row('Jupiter', '95')\nrich.print(table)",
        {},
    ),
]
INDEX = {name: i for i, (name, _, _) in enumerate(CELLS)}


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    return artifacts_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def page(tmp_path_factory, artifacts):
    """Runs the notebook in the browser once; returns (what the driver printed, screenshot path)."""
    require_browser()
    require(
        importlib.util.find_spec("notebook") is not None and NOTEBOOK_MAJOR is not None,
        "the Jupyter Notebook is not installed for %s (Debian package jupyter-notebook)" % PYC_PYTHON,
    )

    tmp = tmp_path_factory.mktemp("notebook-browser")
    nbdir = tmp / "notebooks"
    nbdir.mkdir()
    nb = new_notebook(
        cells=[new_code_cell(src, metadata={k: v for k, v in meta.items() if k != "reconnect"})
               for _, src, meta in CELLS],
        metadata={
            "kernelspec": {"name": "pyc", "display_name": "Python 3 (pyc)", "language": "python"},
            "language_info": {"name": "python"},
        },
    )
    nbformat.write(nb, str(nbdir / "browser.ipynb"))

    port = free_port()
    token = secrets.token_hex(16)
    base = "http://127.0.0.1:%d" % port
    server_log = os.path.join(env_root(), "logs", "notebook-server-%d.log" % port)
    common = ["--no-browser", "--allow-root", "--ip=127.0.0.1", "--port=%d" % port, "--port-retries=0"]
    shot = os.path.join(artifacts, "notebook-browser%s.png" % ("" if IS_PYC else "-override"))
    cfg = {
        "url": "%s/notebooks/browser.ipynb?token=%s" % (base, token),
        "chromium": CHROMIUM,
        "userDataDir": str(tmp / "chromium-profile"),
        "screenshot": shot,
        "answer": ANSWER,
        "timeoutMs": 90000,
    }
    watched = Watched(os.path.join(str(tmp), ""))
    try:
        if CLASSIC:
            argv = [PYC_PYTHON, "-m", "notebook"] + common + [
                "--NotebookApp.token=%s" % token, "--NotebookApp.password=", "--notebook-dir=%s" % nbdir,
            ]  # fmt: skip
            if (_major("jupyter_client") or 0) >= 8:
                # The classic Notebook server (6.4) on jupyter_client 8 (Debian 13) starts each kernel through
                # jupyter_core's run_sync, on a thread of its own, and its restarter takes *that* thread's
                # IOLoop as the kernel manager's loop: every ZMQStream of the kernel then calls back on that
                # thread and writes to the page's websocket while the main thread does too.  Whatever the
                # kernel (ipykernel too), the page now and then gets a corrupt frame ("Invalid frame
                # header", plotly.js's inline script cut short) or loses iopub for good (tornado's "assert 0
                # < size <= self._size"); jupyter/jupyter_client#948.  Without the restarter the loop is
                # taken where the streams are made, on the main thread.  README says the same to users.
                argv.append("--KernelManager.autorestart=False")
            start_jupyter(watched, argv, base, token, server_log)
            script = "notebook.mjs"
            if _major("ipywidgets") == 6:
                cfg["reconnectAfter"] = [i for i, (_, _, meta) in enumerate(CELLS) if meta.get("reconnect")]
        else:
            require(WIDGETS_CSS is not None, "ipywidgets' JupyterLab extension is not installed (Debian package "
                    "python3-jupyterlab-widgets)")
            # Notebook 7 is a jupyter_server application; window.jupyterapp gives lab.mjs the app's model
            argv = [PYC_PYTHON, "-m", "notebook"] + common + [
                "--ServerApp.token=%s" % token, "--ServerApp.root_dir=%s" % nbdir, "--expose-app-in-browser",
            ]  # fmt: skip
            env = lab_env(tmp, NOTEBOOK7_SETTINGS)
            if not plotly_labextension():
                # the renderer plotly documents for JupyterLab without its extension: the figure as an HTML
                # file (plotly.js inline) beside the notebook, shown in an iframe
                env["PLOTLY_RENDERER"] = "iframe"
            start_jupyter(watched, argv, base, token, server_log, env=env)
            script = "lab.mjs"
            cfg["waitForRich"] = True
        result = run_driver(watched, script, cfg, tmp, 110)
        print("screenshot: %s" % shot)
        yield result, shot
    finally:
        watched.close()


def cell(result, name):
    assert result.get("ok"), "the page could not be driven: %s" % result.get("error")
    cells = result["cells"]
    assert len(cells) == len(CELLS), "the page shows %d code cells, not %d" % (len(cells), len(CELLS))
    c = cells[INDEX[name]]
    # shown with the test's failure: what the page's websocket carried for this cell (Notebook 6's driver
    # logs it), so that a missing output is told apart from one the page did not draw
    source = CELLS[INDEX[name]][1]
    ws = result.get("ws") or []
    ids = {m["id"] for m in ws if m.get("type") == "execute_request" and source.startswith(m.get("code") or "\0")}
    for m in ws:
        if m.get("id") in ids or m.get("parent") in ids or m.get("dir") == "closed":
            print(m)
    print("steps:", result.get("steps"), "console errors:", result.get("consoleErrors"))
    return c


def text_of(c):
    return "\n".join(o["text"] for o in c["outputs"])


def last_line(c):
    lines = [ln for ln in text_of(c).splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "(no output)"


def test_page_ran_every_cell(page):
    result, shot = page
    assert result.get("ok"), "the page could not be driven: %s\n%s" % (result.get("error"), result.get("stderr"))
    assert result["kernelName"] == "pyc"
    unfinished = [(CELLS[r["index"]][0], r.get("error")) for r in result["runs"] if not r.get("done")]
    assert not unfinished, "cells that did not finish: %s" % unfinished
    # "In [3]:" (Notebook 6; with a no-break space) or "[3]:" (Notebook 7)
    prompts = [" ".join(c["prompt"].split()) for c in result["cells"]]
    assert all(re.fullmatch(r"(In )?\[\d+\]:", p) for p in prompts), prompts
    assert os.path.getsize(shot) > 10000, "the screenshot %s is (almost) empty" % shot


def test_print_shows(page):
    c = cell(page[0], "print")
    assert PRINTED in text_of(c), c


def test_dataframe_table(page):
    c = cell(page[0], "dataframe")
    tables = [t for o in c["outputs"] for t in o["tables"]]
    assert tables, "no <table> for the DataFrame; the cell shows %r" % text_of(c)
    t = tables[0]
    assert {"name", "value"} <= set(t["headers"]), t
    for v in ("alpha", "beta", "gamma", "1", "22", "333"):
        assert v in t["cells"], (v, t)


def test_plot_image(page):
    c = cell(page[0], "plot")
    imgs = [i for o in c["outputs"] for i in o["imgs"]]
    assert imgs, "no <img> for the plot; the cell shows %r" % text_of(c)
    img = imgs[0]
    assert img["src"].startswith("data:image/png;base64,"), img
    assert img["complete"] and img["naturalWidth"] > 100 and img["naturalHeight"] > 50, img


def test_traceback_shows(page):
    c = cell(page[0], "error")
    errors = [o for o in c["outputs"] if o["error"]]
    assert errors, "no error output; the cell shows %r" % text_of(c)
    assert "ZeroDivisionError" in errors[0]["text"], errors[0]["text"]
    assert "division by zero" in errors[0]["text"], errors[0]["text"]


def test_input_answered(page):
    result = page[0]
    c = cell(result, "input")
    assert result.get("inputPrompt") is not None, "the input box did not appear; the cell shows %r" % text_of(c)
    assert result["inputPrompt"].startswith(PROMPT.strip()), result["inputPrompt"]
    text = text_of(c)
    # the Notebook echoes the prompt and the answer once the box is submitted (Notebook 7 with a space
    # between them)
    assert re.search(re.escape(PROMPT) + " ?" + re.escape(ANSWER), text), text
    assert "Hello, %s!" % ANSWER in text, text
    assert not any(o["rawInput"] for o in c["outputs"]), "the input box is still shown"


def test_slider_renders_and_follows_python(page):
    c = cell(page[0], "slider")
    sliders = [w for w in c["widgets"] if "slider" in w["classes"]]
    assert sliders, "no slider widget; the cell shows %r" % text_of(c)
    assert "knob" in sliders[0]["text"], sliders[0]
    # the value was set to 8 (of 0..10) from Python in the next cell: the slider on the page moved there
    assert sliders[0]["readout"] == "8", sliders[0]
    check_widget(sliders[0], "slider", 0.8, WIDGETS_CSS)


def test_tqdm_notebook_bar(page):
    c = cell(page[0], "tqdm")
    bars = [w for w in c["widgets"] if "progress" in w["classes"]]
    assert bars, "no progress bar widget; the cell shows %r" % text_of(c)
    assert "counting" in bars[0]["boxText"] and "40/40" in bars[0]["boxText"], bars[0]
    check_widget(bars[0], "progress bar", 1.0, WIDGETS_CSS)


def test_plotly_figure(page):
    c = cell(page[0], "plotly")
    assert any(o["plotly"] for o in c["outputs"]), "no plotly graph; the cell shows %r; waited %s ms; frames: %s" % (
        text_of(c)[:300], page[0].get("plotlyWaitMs"), page[0].get("frames"))


def test_sympy_math(page):
    c = cell(page[0], "sympy")
    assert any(o["math"] for o in c["outputs"]), "no typeset math; the cell shows %r" % text_of(c)[:300]


def test_rich_table(page):
    c = cell(page[0], "rich")
    text = text_of(c)
    assert "Jupiter" in text and "95" in text and "┃" in text, text
    assert any(o["html"] for o in c["outputs"]), [o["classes"] for o in c["outputs"]]
