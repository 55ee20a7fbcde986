"""JupyterLab 4 in headless Chromium, driven by playwright-core (tests/clients/browser/lab.mjs): a notebook
with kernel pyc opened in `python3 -m jupyterlab`, a few cells run with Shift+Enter (print, an error, an
ipywidgets slider that Python moves), then Tab completion typed as a user does it: `pri` + Tab in an empty
cell must show `print` in the completer's list (or insert it, when it is the only match), and after
`import os`, `os.pa` + Tab must show `path`.

JupyterLab waits for each completion provider at most providerTimeout (1000 ms by default) and drops a
later answer without a word: the page then shows nothing.  The driver logs the kernel messages of the
page's websocket, so that a failure says how long the complete_reply took and what it held.  The slider
test is an expected failure while Debian's ipywidgets extension lacks ipywidgets' stylesheet
(webserver.widgets_labextension).

Needs Debian's jupyterlab (13 and later; Debian 12 has none, and the tests skip there with that reason),
chromium, and `npm ci` in tests/clients/browser (.ci/deps does them).  Without them the tests skip, except
in CI (CI=true) where they fail.  The screenshot goes to $PYC_ARTIFACTS_DIR (default: <pytest tmp
dir>/artifacts).
"""

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
    IN_CI,
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

def _codename():
    try:
        with open("/etc/os-release") as f:
            return dict(ln.rstrip("\n").split("=", 1) for ln in f if "=" in ln).get("VERSION_CODENAME", "").strip('"')
    except OSError:
        return ""


HAVE_LAB = importlib.util.find_spec("jupyterlab") is not None
# Debian 12 has no JupyterLab package: skipped there, in CI too; elsewhere a missing JupyterLab is a missing
# prerequisite (the fixture's require: a failure in CI)
if not HAVE_LAB and (not IN_CI or _codename() == "bookworm"):
    pytest.skip(
        "JupyterLab is not installed for %s (Debian package jupyterlab, from Debian 13 on)" % PYC_PYTHON,
        allow_module_level=True,
    )

PRINTED = "Hello from JupyterLab!"

CELLS = [
    ("print", 'print("%s")' % PRINTED, {}),
    # raises-exception: JupyterLab then sends stop_on_error=false, so the cells after it still run
    ("error", "1 / 0", {"tags": ["raises-exception"]}),
    ("slider", "import ipywidgets\nslider = ipywidgets.IntSlider(value=3, max=10, description='knob')\nslider", {}),
    ("slider_move", "slider.value = 8", {}),
    ("import_os", "import os", {}),
]
INDEX = {name: i for i, (name, _, _) in enumerate(CELLS)}

# Typed into the empty cell after the last one, then Tab.
COMPLETIONS = [
    {"name": "print", "code": "pri"},
    {"name": "os_path", "code": "os.pa"},
]
CINDEX = {c["name"]: i for i, c in enumerate(COMPLETIONS)}

WIDGETS_CSS = widgets_labextension() if HAVE_LAB else None


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    return artifacts_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def page(tmp_path_factory, artifacts):
    """Runs the notebook and the completions in JupyterLab once; returns (what lab.mjs printed, screenshot
    path)."""
    require_browser()
    require(HAVE_LAB, "JupyterLab is not installed for %s (Debian package jupyterlab)" % PYC_PYTHON)
    require(
        WIDGETS_CSS is not None,
        "ipywidgets' JupyterLab extension is not installed (Debian package python3-jupyterlab-widgets)",
    )

    tmp = tmp_path_factory.mktemp("jupyterlab-browser")
    nbdir = tmp / "notebooks"
    nbdir.mkdir()
    nb = new_notebook(
        cells=[new_code_cell(src, metadata=meta) for _, src, meta in CELLS],
        metadata={
            "kernelspec": {"name": "pyc", "display_name": "Python 3 (pyc)", "language": "python"},
            "language_info": {"name": "python"},
        },
    )
    nbformat.write(nb, str(nbdir / "lab.ipynb"))

    port = free_port()
    token = secrets.token_hex(16)
    base = "http://127.0.0.1:%d" % port
    server_log = os.path.join(env_root(), "logs", "jupyterlab-server-%d.log" % port)
    shot = os.path.join(artifacts, "jupyterlab-browser%s.png" % ("" if IS_PYC else "-override"))
    watched = Watched(os.path.join(str(tmp), ""))
    try:
        argv = [
            PYC_PYTHON, "-m", "jupyterlab",
            "--no-browser", "--allow-root", "--ip=127.0.0.1", "--port=%d" % port, "--port-retries=0",
            "--ServerApp.token=%s" % token, "--ServerApp.root_dir=%s" % nbdir,
            # window.jupyterapp: lab.mjs reads the notebook's model and kernel through it
            "--LabApp.expose_app_in_browser=True",
        ]  # fmt: skip
        start_jupyter(watched, argv, base, token, server_log, env=lab_env(tmp))
        cfg = {
            "url": "%s/lab/tree/lab.ipynb?token=%s" % (base, token),
            "chromium": CHROMIUM,
            "userDataDir": str(tmp / "chromium-profile"),
            "screenshot": shot,
            "answer": "",
            "timeoutMs": 50000,
            "completions": COMPLETIONS,
        }
        result = run_driver(watched, "lab.mjs", cfg, tmp, 70)
        print("screenshot: %s" % shot)
        yield result, shot
    finally:
        watched.close()


def cell(result, name):
    assert result.get("ok"), "the page could not be driven: %s\n%s" % (result.get("error"), result.get("stderr"))
    cells = result["cells"]
    assert len(cells) == len(CELLS), "the page shows %d code cells, not %d" % (len(cells), len(CELLS))
    return cells[INDEX[name]]


def text_of(c):
    return "\n".join(o["text"] for o in c["outputs"])


def completion(result, name):
    assert result.get("ok"), "the page could not be driven: %s\n%s" % (result.get("error"), result.get("stderr"))
    c = result["completions"][CINDEX[name]]
    assert not c.get("error"), "the completion could not be driven: %s" % c
    assert c["typed"] == c["code"], "the cell holds %r, not the typed %r" % (c["typed"], c["code"])
    return c


def describe(c):
    """What the page showed after Tab, and the complete_request(s) the Tab sent with their replies."""
    lines = ["after Tab the completer shows %s and the cell holds %r (%s)" % (
        c["items"] or "nothing", c["text"],
        "within %d ms" % c["shownAfterMs"] if c["shownAfterMs"] is not None else "nothing changed in 5 s")]
    if not c["requests"]:
        lines.append("no complete_request went to the kernel")
    for r in c["requests"]:
        reply = r["reply"]
        if reply is None:
            lines.append("complete_request %r at %d: no reply" % (r["code"], r["cursorPos"]))
            continue
        lines.append(
            "complete_request %r at %d, sent %d ms after Tab: complete_reply after %d ms (JupyterLab waits %d ms), "
            "status %s, %d matches %s, cursor %s..%s, types %s" % (
                r["code"], r["cursorPos"], r["sentAfterTabMs"], r["replyMs"], PROVIDER_TIMEOUT_MS,
                reply["status"], reply["nMatches"], reply["matches"][:8], reply["cursorStart"],
                reply["cursorEnd"], reply["types"][:2] if isinstance(reply["types"], list) else reply["types"]))
    return "\n".join(lines)


#: JupyterLab's default completer providerTimeout (@jupyterlab/completer-extension:manager).
PROVIDER_TIMEOUT_MS = 1000


def assert_completed(c, word, line):
    """Tab showed `word` in the list, or completed the line to `line` (the only match inserted)."""
    assert word in c["items"] or c["text"] == line, describe(c)


def test_page_ran_every_cell(page):
    result, shot = page
    assert result.get("ok"), "the page could not be driven: %s\n%s" % (result.get("error"), result.get("stderr"))
    assert result["kernelName"] == "pyc"
    unfinished = [(CELLS[r["index"]][0], r.get("error")) for r in result["runs"] if not r.get("done")]
    assert not unfinished, "cells that did not finish: %s" % unfinished
    prompts = [" ".join(c["prompt"].split()) for c in result["cells"]]
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), prompts
    assert os.path.getsize(shot) > 10000, "the screenshot %s is (almost) empty" % shot


def test_print_shows(page):
    c = cell(page[0], "print")
    assert PRINTED in text_of(c), c


def test_traceback_shows(page):
    c = cell(page[0], "error")
    errors = [o for o in c["outputs"] if o["error"]]
    assert errors, "no error output; the cell shows %r" % text_of(c)
    assert "ZeroDivisionError" in errors[0]["text"], errors[0]["text"]
    assert "division by zero" in errors[0]["text"], errors[0]["text"]


def test_slider_renders_and_follows_python(page):
    c = cell(page[0], "slider")
    sliders = [w for w in c["widgets"] if "slider" in w["classes"]]
    assert sliders, "no slider widget; the cell shows %r" % text_of(c)
    assert "knob" in sliders[0]["text"], sliders[0]
    # the value was set to 8 (of 0..10) from Python in the next cell: the slider on the page moved there
    assert sliders[0]["readout"] == "8", sliders[0]
    check_widget(sliders[0], "slider", 0.8, WIDGETS_CSS)


def test_tab_completes_builtin(page):
    c = completion(page[0], "print")
    assert_completed(c, "print", "print")


def test_tab_completes_attribute(page):
    c = completion(page[0], "os_path")
    assert_completed(c, "path", "os.path")
