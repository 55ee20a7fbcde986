"""The classic Jupyter Notebook page in headless Chromium, driven by playwright-core (tests/clients/browser).

One notebook server and one browser run per module: the node script opens a notebook whose kernelspec is
`pyc`, runs its cells one by one with Shift+Enter (each to its end, so that a failing cell does not abort
the next ones), answers the input() prompt by typing into the box, reads what the page shows for each cell
and saves a full-page screenshot; the tests below check that page.

Needs Debian's jupyter-notebook and chromium, and `npm ci` in tests/clients/browser (.ci/deps does both).
Without them the tests skip, except in CI (CI=true) where they fail.  The screenshot goes to
$PYC_ARTIFACTS_DIR (default: <pytest tmp dir>/artifacts).
"""

import importlib.util
import json
import os
import secrets
import shutil
import subprocess

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from pyctest import IS_PYC, PYC_PYTHON, child_env, env_root
from webserver import Watched, free_port, require, wait_server

HERE = os.path.dirname(os.path.abspath(__file__))
BROWSER_DIR = os.path.join(HERE, "browser")
CHROMIUM = os.environ.get("PYC_CHROMIUM", "/usr/bin/chromium")

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
    # ipywidgets 6's page code asks the kernel for its version once, when it connects: before ipywidgets is
    # imported nobody answers, so the page reconnects after this cell ("Reconnecting the current kernel may
    # help", as ipywidgets itself says; the same with ipykernel).
    ("widgets", "import ipywidgets", {"reconnect": True}),
    ("slider", "slider = ipywidgets.IntSlider(value=3, max=10, description='knob')\nslider", {}),
    ("slider_move", "slider.value = 8", {}),
    (
        "tqdm",
        "import tqdm.notebook\n"
        "# Debian 12's tqdm 4.64 colours its bar through a style that ipywidgets 6 lacks (ipykernel fails the\n"
        "# same way); without colours the bar is tqdm's own notebook bar.\n"
        "tqdm.notebook.tqdm_notebook.colour = property(lambda self: None, lambda self, value: None)\n"
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
def artifacts_dir(tmp_path_factory):
    d = os.environ.get("PYC_ARTIFACTS_DIR") or str(tmp_path_factory.getbasetemp() / "artifacts")
    os.makedirs(d, exist_ok=True)
    print("artifacts dir: %s" % d)
    return d


@pytest.fixture(scope="module")
def page(tmp_path_factory, artifacts_dir):
    """Runs the notebook in the browser once; returns (what notebook.mjs printed, screenshot path)."""
    require(shutil.which("node") is not None, "node is not installed")
    require(os.access(CHROMIUM, os.X_OK), "Chromium is not installed (%s; Debian package chromium)" % CHROMIUM)
    require(
        os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")),
        "playwright-core is not installed (npm ci in %s)" % BROWSER_DIR,
    )
    require(
        importlib.util.find_spec("notebook") is not None,
        "the classic Notebook is not installed for %s (Debian package jupyter-notebook)" % PYC_PYTHON,
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
    watched = Watched(os.path.join(str(tmp), ""))
    try:
        with open(server_log, "wb") as log:
            server = watched.start(
                [
                    PYC_PYTHON, "-m", "notebook",
                    "--no-browser", "--allow-root",
                    "--ip=127.0.0.1", "--port=%d" % port, "--port-retries=0",
                    "--NotebookApp.token=%s" % token,
                    "--NotebookApp.password=",
                    "--notebook-dir=%s" % nbdir,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        specs = wait_server(server, base, token, server_log)
        assert "pyc" in specs.get("kernelspecs", {}), "the server does not see the pyc kernelspec: %s" % specs

        shot = os.path.join(artifacts_dir, "notebook-browser%s.png" % ("" if IS_PYC else "-override"))
        cfg = {
            "url": "%s/notebooks/browser.ipynb?token=%s" % (base, token),
            "chromium": CHROMIUM,
            "userDataDir": str(tmp / "chromium-profile"),
            "screenshot": shot,
            "answer": ANSWER,
            "timeoutMs": 90000,
            "reconnectAfter": [i for i, (_, _, meta) in enumerate(CELLS) if meta.get("reconnect")],
        }
        cfg_path = tmp / "config.json"
        cfg_path.write_text(json.dumps(cfg))
        out_path = tmp / "node-stdout.txt"
        err_path = tmp / "node-stderr.txt"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            # HOME of its own, so that Chromium's crash database (and so its crashpad handlers) carry the marker
            home = tmp / "browser-home"
            home.mkdir()
            node = watched.start(
                ["node", "notebook.mjs", str(cfg_path)],
                cwd=BROWSER_DIR,
                env=child_env(HOME=str(home)),
                stdout=out,
                stderr=err,
            )
            finished = watched.wait(node, 110)
        if not finished:
            watched.stop(node, grace=3)
        stdout = out_path.read_text(errors="replace")
        stderr = err_path.read_text(errors="replace")
        print("screenshot: %s" % shot)
        if not finished:
            pytest.fail("notebook.mjs did not finish within 110 s\nstdout: %s\nstderr: %s" % (stdout, stderr[-3000:]))
        try:
            result = json.loads(stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            pytest.fail(
                "notebook.mjs printed no JSON (exit %s)\nstdout: %s\nstderr: %s" % (node.returncode, stdout, stderr)
            )
        result["stderr"] = stderr
        yield result, shot
    finally:
        watched.close()


def cell(result, name):
    assert result.get("ok"), "the page could not be driven: %s" % result.get("error")
    cells = result["cells"]
    assert len(cells) == len(CELLS), "the page shows %d code cells, not %d" % (len(cells), len(CELLS))
    return cells[INDEX[name]]


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
    prompts = [" ".join(c["prompt"].split()) for c in result["cells"]]  # the prompt has a no-break space
    assert all(p.startswith("In [") and p not in ("In [*]:", "In [ ]:") for p in prompts), prompts
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
    errors = [o for o in c["outputs"] if "output_error" in o["classes"]]
    assert errors, "no error output; the cell shows %r" % text_of(c)
    assert "ZeroDivisionError" in errors[0]["text"], errors[0]["text"]
    assert "division by zero" in errors[0]["text"], errors[0]["text"]


def test_input_answered(page):
    result = page[0]
    c = cell(result, "input")
    assert result.get("inputPrompt") is not None, "the input box did not appear; the cell shows %r" % text_of(c)
    assert result["inputPrompt"].startswith(PROMPT.strip()), result["inputPrompt"]
    text = text_of(c)
    # the Notebook echoes the prompt and the answer as stdout once the box is submitted
    assert PROMPT + ANSWER in text, text
    assert "Hello, %s!" % ANSWER in text, text
    assert not any(o["rawInput"] for o in c["outputs"]), "the input box is still shown"


def test_slider_renders_and_follows_python(page):
    c = cell(page[0], "slider")
    sliders = [w for w in c["widgets"] if "slider" in w["classes"]]
    assert sliders, "no slider widget; the cell shows %r" % text_of(c)
    # the value was set to 8 from Python in the next cell: the slider on the page moved
    assert sliders[0]["readout"] == "8", sliders[0]
    assert "knob" in sliders[0]["text"], sliders[0]


def test_tqdm_notebook_bar(page):
    c = cell(page[0], "tqdm")
    bars = [w for w in c["widgets"] if "progress" in w["classes"]]
    assert bars, "no progress bar widget; the cell shows %r" % text_of(c)
    assert "counting" in bars[0]["boxText"] and "40/40" in bars[0]["boxText"], bars[0]


def test_plotly_figure(page):
    c = cell(page[0], "plotly")
    assert any(o["plotly"] for o in c["outputs"]), "no plotly graph; the cell shows %r" % text_of(c)[:300]


def test_sympy_math(page):
    c = cell(page[0], "sympy")
    assert any(o["math"] for o in c["outputs"]), "no typeset math; the cell shows %r" % text_of(c)[:300]


def test_rich_table(page):
    c = cell(page[0], "rich")
    text = text_of(c)
    assert "Jupiter" in text and "95" in text and "┃" in text, text
    assert any("output_html" in o["classes"] for o in c["outputs"]), [o["classes"] for o in c["outputs"]]
