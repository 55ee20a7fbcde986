"""Everyday notebook code behaves as under ipykernel (issue 10), through jupyter_client: the names and the
sys.path a notebook expects, IPython's display protocol and text layout, colored tracebacks, and, with
IPython installed, a real IPython shell (get_ipython, IPython.display, formatters, events, magics,
%autoreload) that the libraries people use find: ipywidgets, tqdm, rich, plotly, sympy, altair,
scikit-learn.  Every test but the pyc_only ones runs against ipykernel too (PYC_TEST_ARGV)."""

import base64
import importlib.util
import queue
import re
import time
import textwrap
import uuid

import pytest

import pyctest
from pyctest import eval_value, execute, ipykernel_falls_short, outputs, pyc_only, result_text, stream_text

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def ok(kc, code, **kw):
    reply, msgs = execute(kc, code, **kw)
    assert reply["content"]["status"] == "ok", (reply["content"], pyctest.summarize(msgs))
    return msgs


def data_of(msgs, types=("execute_result", "display_data")):
    outs = outputs(msgs, list(types))
    assert outs, pyctest.summarize(msgs)
    return outs[-1]["content"]["data"]


def plain(text):
    return ANSI.sub("", text)


# ---- the Python that notebooks expect, without IPython ----------------------------------------------------


def test_a_module_beside_the_notebook_imports(kc):
    name = "beside_%s" % uuid.uuid4().hex[:8]
    ok(kc, "open(%r, 'w').write('VALUE = 42\\n')" % (name + ".py"))
    try:
        # The notebook's directory comes before installed packages: '' first, as `python -i` has it (pyc);
        # ipykernel 6's launcher puts the absolute directory first, ipykernel 7's IPython puts '' before the
        # first site-packages (after the standard library).
        first = ("(lambda d: [p for p in __import__('sys').path if p in ('', d) or "
                 "p.endswith(('site-packages', 'dist-packages'))][0] in ('', d))(__import__('os').getcwd())")
        assert eval_value(kc, first) == "True"
        if pyctest.IS_PYC:
            assert eval_value(kc, "__import__('sys').path[0]") == "''"
        msgs = ok(kc, "import %s\n%s.VALUE" % (name, name))
        assert result_text(msgs) == "42"
    finally:
        ok(kc, "import os; os.remove(%r)" % (name + ".py"))


def test_in_out_and_underscore_names(kc):
    msgs = ok(kc, "40 + 2")
    n = outputs(msgs, "execute_result")[0]["content"]["execution_count"]
    ok(kc, "'second'")
    msgs = ok(kc, "print(_, __, _%d, Out[%d], _i%d, In[%d], _i, _ii)" % (n, n, n, n))
    assert stream_text(msgs) == "second 42 42 42 40 + 2 40 + 2 'second' 40 + 2\n"
    assert eval_value(kc, "In is _ih and Out is _oh and isinstance(In, list)") == "True"
    # a name the user assigned is left alone
    ok(kc, "_ = 'mine'")
    ok(kc, "7")
    assert eval_value(kc, "_") == "'mine'"
    ok(kc, "del _")


def test_ipython_display_and_keyword_mimebundle(kc):
    ok(kc, textwrap.dedent("""\
        class ShowsItself:
            def _ipython_display_(self):
                print("shown by itself")

        class Widget8:
            # ipywidgets 8's convention: keywords only, a view of a model
            def _repr_mimebundle_(self, **kwargs):
                assert set(kwargs) <= {"include", "exclude"}, kwargs
                return {"text/plain": "Widget8()",
                        "application/vnd.jupyter.widget-view+json": {"version_major": 2, "version_minor": 0,
                                                                     "model_id": "m1"}}
        """))
    msgs = ok(kc, "ShowsItself()")
    assert stream_text(msgs) == "shown by itself\n"
    assert not outputs(msgs, ["execute_result", "display_data"])
    msgs = ok(kc, "Widget8()")
    data = data_of(msgs)
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == "m1"
    assert data["text/plain"] == "Widget8()"
    assert stream_text(msgs, "stderr") == ""


def test_results_are_laid_out_as_ipython_does(kc):
    msgs = ok(kc, "list(range(10**6))")
    text = result_text(msgs)
    assert len(text) < 10000 and text.endswith("...]")
    assert max(len(line) for line in text.splitlines()) <= 79
    ok(kc, textwrap.dedent("""\
        class Pretty:
            def _repr_pretty_(self, p, cycle):
                with p.group(4, "Pty(", ")"):
                    p.text("a,")
                    p.breakable()
                    p.text("b")
        """))
    assert result_text(ok(kc, "Pretty()")) == "Pty(a, b)"
    text = result_text(ok(kc, "{'k%d' % i: list(range(i)) for i in range(6)}"))
    try:
        from IPython.lib.pretty import pretty
    except ImportError:
        return
    assert text == pretty({'k%d' % i: list(range(i)) for i in range(6)})


def test_tracebacks_are_colored_as_ipython_colors_them(kc):
    reply, msgs = execute(kc, "def boom():\n    return 1 / 0\nboom()")
    assert reply["content"]["status"] == "error"
    tb = "\n".join(outputs(msgs, "error")[0]["content"]["traceback"])
    # red: IPython 8 writes \x1b[0;31m...\x1b[0m, IPython 9 \x1b[31m...\x1b[39m
    assert re.search(r"\x1b\[(0;)?31mZeroDivisionError\x1b\[(0|39)?m", tb), tb
    text = plain(tb)
    count = reply["content"]["execution_count"]
    assert re.search(r"Cell In ?\[%d\], line 3" % count, text), text
    assert re.search(r"----> 3\s+boom\(\)", text) and "ZeroDivisionError: division by zero" in text


@pyc_only
def test_tracebacks_without_color_when_the_client_asks(kc):
    msg_id = pyctest.send(kc, "execute_request", {"code": "1 / 0", "silent": False}, metadata={"pyc": {"color": False}})
    pyctest.get_reply(kc, msg_id)
    tb = "\n".join(outputs(pyctest.iopub_for(kc, msg_id), "error")[0]["content"]["traceback"])
    assert "\x1b" not in tb and "ZeroDivisionError: division by zero" in tb


@pyc_only
def test_ipython_is_not_imported_at_start_nor_by_plain_cells(fresh_kernel):
    kc = fresh_kernel.kc
    ok(kc, "x = [1, 2]\nx")
    ok(kc, "y = 2")
    assert eval_value(kc, "'IPython' in __import__('sys').modules") == "False"
    assert eval_value(kc, "callable(get_ipython)") == "True"     # the builtin is there, lazily


@pyc_only
def test_without_ipython(tmp_path):
    """PYC_IPYTHON=0: no get_ipython, and the magics that only IPython has say so; the rest works."""
    with pyctest.Kernel("pyc", env={"PYC_IPYTHON": "0"}) as k:
        assert eval_value(k.kc, "'get_ipython' in dir(__builtins__)") == "False"
        reply, _ = execute(k.kc, "%load_ext autoreload")
        assert reply["content"]["ename"] == "UnknownMagic"
        assert "IPython magic" in reply["content"]["evalue"]
        assert result_text(ok(k.kc, "_ = 5\n[1, 2]")) == "[1, 2]"


# ---- an IPython shell, when IPython is installed -----------------------------------------------------------

needs = {name: pytest.mark.skipif(importlib.util.find_spec(name) is None, reason="%s is not installed" % name)
         for name in ("IPython", "ipywidgets", "tqdm", "rich", "plotly", "sympy", "altair", "sklearn", "pip")}


@needs["IPython"]
def test_get_ipython_is_a_kernel_shell(kc):
    text = result_text(ok(kc, "ip = get_ipython()\n"
                              "(type(ip).__name__, 'IPKernelApp' in ip.config, ip is __import__('IPython')"
                              ".get_ipython(), hasattr(ip.kernel, 'comm_manager'), "
                              "__import__('sys').modules['ipykernel.zmqshell'].ZMQInteractiveShell is type(ip))"))
    assert text == "('ZMQInteractiveShell', True, True, True, True)"


@needs["IPython"]
def test_results_carry_the_cells_count_under_the_shell(kc):
    """With IPython's shell in place, a result's execution_count, Out[N] and _N are the cell's N, in the cell
    that imports IPython and after it: IPython 8 counts the running cell as shell.execution_count, 9 as
    execution_count - 1 (it adds one before the cell runs), and the kernel follows whichever is there."""
    reply, msgs = execute(kc, "import IPython\n'first'")
    n = reply["content"]["execution_count"]
    assert outputs(msgs, "execute_result")[0]["content"]["execution_count"] == n
    reply, msgs = execute(kc, "get_ipython().execution_count, get_ipython().displayhook.prompt_count")
    m = reply["content"]["execution_count"]
    assert m == n + 1 and outputs(msgs, "execute_result")[0]["content"]["execution_count"] == m
    shell_count, prompt_count = eval(result_text(msgs))
    assert prompt_count == m and shell_count in (m, m + 1)
    assert eval_value(kc, "Out[%d], _%d" % (n, n)) == "('first', 'first')"


@needs["IPython"]
def test_ipython_display_publishes(kc):
    msgs = ok(kc, "from IPython.display import display, HTML, Markdown, clear_output\n"
                  "display(HTML('<b>bold</b>'))\nclear_output(wait=True)\nh = display('first', display_id=True)\n"
                  "h.update('second')")
    types = [m["msg_type"] for m in outputs(msgs)]
    assert types == ["display_data", "clear_output", "display_data", "update_display_data"], types
    html = outputs(msgs, "display_data")[0]["content"]["data"]
    assert html["text/html"] == "<b>bold</b>"
    upd = outputs(msgs, "update_display_data")[0]["content"]
    assert upd["data"]["text/plain"] == "'second'" and upd["transient"]["display_id"]


@needs["IPython"]
def test_binary_bundles_travel_as_base64(kc):
    """Bytes of image types are base64 text in the message, whether the bundle is raw or IPython's own."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    ok(kc, "png = %r" % png)
    data = data_of(ok(kc, "display({'image/png': png, 'text/plain': 'raw png'}, raw=True)"))
    assert base64.b64decode(data["image/png"]) == png and data["text/plain"] == "raw png"
    data = data_of(ok(kc, "from IPython.display import Image\ndisplay(Image(data=png, format='png'))"))
    assert base64.b64decode(data["image/png"]) == png
    assert base64.b64decode(data_of(ok(kc, "Image(data=png, format='png')"))["image/png"]) == png


@needs["IPython"]
def test_formatters_registered_with_the_shell_format_results(kc):
    ok(kc, "f = get_ipython().display_formatter.formatters['text/plain']\n"
           "class Celsius(float): pass\n"
           "f.for_type(Celsius, lambda v, p, cycle: p.text('%.1f°C' % v))")
    assert result_text(ok(kc, "Celsius(21.5)")) == "21.5°C"
    ok(kc, "get_ipython().display_formatter.formatters['text/html'].for_type(Celsius, lambda v: '<i>%s</i>' % v)")
    assert data_of(ok(kc, "Celsius(3)"))["text/html"] == "<i>3.0</i>"


@needs["IPython"]
def test_shell_events_fire_around_every_cell(kc):
    ok(kc, "seen = []\n"
           "def pre(info): seen.append(('pre', info.raw_cell))\n"
           "def post(result): seen.append(('post', result.success))\n"
           "get_ipython().events.register('pre_run_cell', pre)\n"
           "get_ipython().events.register('post_run_cell', post)")
    execute(kc, "1 / 0")
    ok(kc, "get_ipython().events.unregister('pre_run_cell', pre)\n"
           "get_ipython().events.unregister('post_run_cell', post)")
    assert eval_value(kc, "[s[0] for s in seen[:4]]") == "['post', 'pre', 'post', 'pre']"
    assert eval_value(kc, "seen[1:3]") == "[('pre', '1 / 0'), ('post', False)]"


@needs["IPython"]
def test_autoreload(kc):
    name = "auto_%s" % uuid.uuid4().hex[:8]
    write = "import os, time\nopen(%r, 'w').write('def f():\\n    return %%d\\n')\nos.utime(%r, (time.time() + %%d,) * 2)"
    ok(kc, write % (name + ".py", name + ".py") % (1, 0))
    try:
        ok(kc, "%load_ext autoreload")
        ok(kc, "%autoreload 2")
        assert result_text(ok(kc, "import %s\n%s.f()" % (name, name))) == "1"
        ok(kc, write % (name + ".py", name + ".py") % (2, 5))
        assert result_text(ok(kc, "%s.f()" % name)) == "2"
    finally:
        ok(kc, "%autoreload 0")
        ok(kc, "import os; os.remove(%r)" % (name + ".py"))


@needs["IPython"]
def test_ipython_magics(kc, tmp_path):
    msgs = ok(kc, "%%capture captured\nprint('quiet')")
    assert stream_text(msgs) == ""
    assert eval_value(kc, "captured.stdout") == "'quiet\\n'"
    target = str(tmp_path / "written.txt")
    ok(kc, "%%%%writefile %s\nline one" % target)
    assert open(target).read() == "line one\n"
    assert stream_text(ok(kc, "%%bash\necho from bash")) == "from bash\n"
    assert data_of(ok(kc, "%%html\n<i>html</i>"))["text/html"].strip() == "<i>html</i>"
    ok(kc, "who_probe = 1")
    assert "who_probe" in stream_text(ok(kc, "%who"))
    script = tmp_path / "script.py"
    script.write_text("ran_value = 99\nprint('script ran')\n")
    assert stream_text(ok(kc, "%run " + str(script))) == "script ran\n"
    assert eval_value(kc, "ran_value") == "99"
    ok(kc, "all_types = list(get_ipython().display_formatter.formatters)")
    ok(kc, "%config DisplayFormatter.active_types = ['text/plain']")
    try:
        assert list(data_of(ok(kc, "from IPython.display import HTML\nHTML('<b>x</b>')"))) == ["text/plain"]
    finally:
        ok(kc, "%config DisplayFormatter.active_types = all_types")


@needs["IPython"]
def test_the_shells_system_runs_in_the_cell(kc):
    """shell.system (what %pip and %sx use): the command is expanded once, its output is the cell's, and its
    exit status lands in the user's _exit_code."""
    ok(kc, "marker = 'from-the-namespace'")
    text = stream_text(ok(kc, "get_ipython().system('echo $marker; exit 3')"))
    assert text.replace("\r\n", "\n") == "from-the-namespace\n"      # ipykernel runs it on a pty
    assert eval_value(kc, "_exit_code") == "3"


@needs["IPython"]
@needs["pip"]
def test_pip_magic_runs_the_kernels_pip(kc):
    text = stream_text(ok(kc, "%pip --version"))
    assert text.startswith("pip ") and "python 3" in text, text


# ---- the libraries --------------------------------------------------------------------------------------


@needs["IPython"]
@needs["ipywidgets"]
def test_ipywidgets_open_comms_and_render(kc):
    msgs = ok(kc, "import ipywidgets\nslider = ipywidgets.IntSlider(value=3)\nslider")
    opens = [m["content"] for m in outputs(msgs, "comm_open")]
    assert opens and all(o["target_name"] == "jupyter.widget" for o in opens)
    slider_id = opens[-1]["comm_id"]
    views = [d for d in (m["content"]["data"] for m in outputs(msgs, ["display_data", "execute_result"]))
             if "application/vnd.jupyter.widget-view+json" in d]
    assert views and views[-1]["application/vnd.jupyter.widget-view+json"]["model_id"] == slider_id
    msgs = ok(kc, "slider.value = 7")
    updates = [m["content"] for m in outputs(msgs, "comm_msg") if m["content"]["comm_id"] == slider_id]
    assert updates and updates[-1]["data"]["state"]["value"] == 7
    assert eval_value(kc, "'jupyter.widget' in get_ipython().kernel.comm_manager.targets") == "True"


@needs["IPython"]
@needs["tqdm"]
@needs["ipywidgets"]
def test_tqdm_auto_chooses_the_notebook_bar(kc):
    assert eval_value(kc, "issubclass(__import__('tqdm.auto', fromlist=['tqdm']).tqdm, "
                          "__import__('tqdm.notebook', fromlist=['tqdm']).tqdm)") == "True"


@needs["IPython"]
@needs["rich"]
def test_rich_knows_it_is_in_jupyter(kc):
    msgs = ok(kc, "import rich\nfrom rich.table import Table\nt = Table('a', 'b')\nt.add_row('1', '2')\n"
                  "rich.print(t)\nrich.get_console().is_jupyter")
    assert "text/html" in data_of(msgs, ["display_data"]) and result_text(msgs) == "True"
    # rich.pretty.install() registers a formatter; results stay rich output, DataFrames stay tables
    ok(kc, "plain_formatter = get_ipython().display_formatter.formatters['text/plain']")
    try:
        msgs = ok(kc, "import rich.pretty, pandas\nrich.pretty.install()\npandas.DataFrame({'a': [1]})")
        assert "text/html" in data_of(msgs) and stream_text(msgs) == ""
    finally:
        ok(kc, "get_ipython().display_formatter.formatters['text/plain'] = plain_formatter")


@needs["IPython"]
@needs["plotly"]
def test_plotly_figure_shows(kc):
    msgs = ok(kc, "import plotly.graph_objects as go\ngo.Figure(go.Bar(y=[1, 2])).show()")
    assert any("application/vnd.plotly.v1+json" in m["content"]["data"] for m in outputs(msgs, "display_data"))


@needs["IPython"]
@needs["sympy"]
def test_sympy_prints_math(kc):
    msgs = ok(kc, "import sympy\nsympy.init_printing()\nx = sympy.Symbol('x')\nx**2 / 3")
    data = data_of(msgs)
    assert "text/latex" in data and "x^{2}" in data["text/latex"]
    assert stream_text(msgs) == ""


@needs["altair"]
def test_altair_chart_renders(kc):
    msgs = ok(kc, "import altair as alt, pandas as pd\n"
                  "alt.Chart(pd.DataFrame({'a': [1, 2]})).mark_bar().encode(x='a')")
    data = data_of(msgs)
    # altair 4's default renderer is HTML that loads vega-embed
    assert any(k.startswith("application/vnd.vegalite") for k in data) or "vegaEmbed" in data.get("text/html", "")


@needs["sklearn"]
def test_sklearn_estimator_has_html_and_no_error(kc):
    msgs = ok(kc, "from sklearn.linear_model import LinearRegression\nLinearRegression()")
    assert "text/html" in data_of(msgs)
    assert stream_text(msgs, "stderr") == ""


# ---- asyncio ---------------------------------------------------------------------------------------------


def wait_for_stream(kc, parent_id, text, timeout=5.0):
    """Collects the stream text published for parent_id until text has appeared (the kernel is idle)."""
    got = ""
    deadline = time.monotonic() + timeout
    while text not in got and time.monotonic() < deadline:
        try:
            m = kc.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            continue
        if m["msg_type"] == "stream" and m["parent_header"].get("msg_id") == parent_id:
            got += m["content"]["text"]
    return got


def test_await_a_task_made_in_the_same_cell_and_in_another(kc):
    code = "import asyncio\nasync def f(v):\n    await asyncio.sleep(0.05)\n    return v\n"
    assert result_text(ok(kc, code + "t = asyncio.create_task(f(1))\nawait t")) == "1"
    ok(kc, "t2 = asyncio.create_task(f(2))\nawait asyncio.sleep(0)")
    assert result_text(ok(kc, "await t2")) == "2"


def test_a_task_made_in_a_plain_cell_runs(kc):
    ok(kc, "import asyncio\nplain = asyncio.create_task(asyncio.sleep(0.05, 'plain'))")
    assert result_text(ok(kc, "await plain")) == "'plain'"


def test_background_tasks_run_while_the_kernel_is_idle(kc):
    reply, _ = execute(kc, "import asyncio\nasync def ticks():\n    for i in range(3):\n"
                           "        await asyncio.sleep(0.1)\n        print('tick', i)\n"
                           "background = asyncio.create_task(ticks())")
    got = wait_for_stream(kc, reply["parent_header"]["msg_id"], "tick 2")
    assert got == "tick 0\ntick 1\ntick 2\n"
    assert eval_value(kc, "background.done()") == "True"


@pyc_only
def test_asyncio_run_and_run_until_complete_work_in_plain_cells(kc):
    ok(kc, "import asyncio\nasync def g():\n    await asyncio.sleep(0.01)\n    return 'g'")
    assert result_text(ok(kc, "asyncio.run(g())")) == "'g'"
    assert result_text(ok(kc, "asyncio.get_event_loop().run_until_complete(g())")) == "'g'"
    assert result_text(ok(kc, "await g()")) == "'g'"      # the kernel's loop again after asyncio.run


@pyc_only
def test_threads_hand_work_to_the_idle_loop(kc):
    ok(kc, "import asyncio, time\nfut = asyncio.get_event_loop().run_in_executor(None, time.sleep, 0.2)")
    time.sleep(0.6)
    assert eval_value(kc, "fut.done()") == "True"


# ---- threads ---------------------------------------------------------------------------------------------


@ipykernel_falls_short
def test_a_thread_writes_to_the_cell_that_started_it(kc):
    first = kc.execute("import threading, time\ndef work():\n    for i in range(3):\n"
                       "        print('from thread', i)\n        time.sleep(0.2)\n"
                       "worker = threading.Thread(target=work)\nworker.start()")
    second = kc.execute("time.sleep(0.8)\nprint('second cell')")
    text = {first: "", second: ""}
    idle = set()
    deadline = time.monotonic() + pyctest.TIMEOUT
    while (second not in idle or "from thread 2" not in text[first] + text[second]) and time.monotonic() < deadline:
        try:
            m = kc.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            continue
        parent = m["parent_header"].get("msg_id")
        if m["msg_type"] == "stream" and parent in text:
            text[parent] += m["content"]["text"]
        elif m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            idle.add(parent)
    assert text == {first: "from thread 0\nfrom thread 1\nfrom thread 2\n", second: "second cell\n"}
