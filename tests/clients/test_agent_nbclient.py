"""nbclient as agent frameworks use it (AutoGen 0.4's JupyterCodeExecutor, MetaGPT's ExecuteNbCode): one
NotebookClient on a notebook built on the fly, one kernel kept for the whole conversation, and each code
block the agent writes appended as a cell and run with async_execute_cell.  What they read back: streams,
results, rich output (PNG plots), errors (CellExecutionError, or error outputs with allow_errors), a cell
over its timeout interrupted with the kernel's state kept, and a kernel that dies reported as
DeadKernelError, not a hang.

The same tests run against ipykernel with PYC_TEST_ARGV (the `pyc` kernelspec then starts it).
"""

import asyncio
import base64
import queue
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from pyctest import IS_PYC, kill_pid, pid_alive, register_pid

KERNEL = "pyc"


class AgentExecutor:
    """The executor of AutoGen's JupyterCodeExecutor in miniature: start() enters nbclient's
    async_setup_kernel (the kernel starts), run(code) appends a cell and executes it, stop() leaves the
    context (the kernel is shut down), and every pid the kernel had is then killed if still alive."""

    def __init__(self, **client_kw):
        from nbclient import NotebookClient

        kw = dict(kernel_name=KERNEL, timeout=60, startup_timeout=60)
        kw.update(client_kw)
        self.client = NotebookClient(new_notebook(), **kw)
        self.context = None
        self.pids = []

    async def start(self):
        self.context = self.client.async_setup_kernel()
        await self.context.__aenter__()
        self.pids.append(register_pid(self.client.km.provisioner.process.pid))

    async def run(self, code):
        """Runs code as the notebook's next cell; returns the cell (nbclient's exceptions propagate)."""
        cell = new_code_cell(code)
        self.client.nb.cells.append(cell)
        return await self.client.async_execute_cell(cell, len(self.client.nb.cells) - 1)

    async def stop(self):
        try:
            if self.context is not None:
                await self.context.__aexit__(None, None, None)
        finally:
            for pid in self.pids:
                deadline = time.monotonic() + 5
                while pid_alive(pid) and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                kill_pid(pid)


def run_agent(body, **client_kw):
    """Runs body(executor) on a fresh executor (in its own event loop), stopping it whatever happens."""

    async def main():
        ex = AgentExecutor(**client_kw)
        try:
            await ex.start()
            return await body(ex)
        finally:
            await ex.stop()

    return asyncio.run(main())


def text_of(cell, name="stdout"):
    return "".join(o["text"] for o in cell.outputs if o["output_type"] == "stream" and o["name"] == name)


def results_of(cell):
    return [o["data"]["text/plain"] for o in cell.outputs if o["output_type"] == "execute_result"]


def test_cells_one_by_one():
    async def body(ex):
        cells = [await ex.run("x = 6 * 7\nprint('x is', x)")]
        cells.append(await ex.run("import sys\nprint('oops', file=sys.stderr)\nx + 1"))
        cells.append(await ex.run(
            "class Bold:\n"
            "    def _repr_html_(self):\n"
            "        return '<b>bold</b>'\n"
            "    def __repr__(self):\n"
            "        return 'Bold()'\n"
            "display(Bold())\n"
            "Bold()"))  # fmt: skip
        cells.append(await ex.run("def f(n):\n    return n * x\n"))
        cells.append(await ex.run("f(2)"))
        return cells

    cells = run_agent(body)
    assert text_of(cells[0]) == "x is 42\n"
    assert text_of(cells[1], "stderr") == "oops\n" and results_of(cells[1]) == ["43"]
    (shown,) = [o for o in cells[2].outputs if o["output_type"] == "display_data"]
    assert shown["data"]["text/html"] == "<b>bold</b>" and shown["data"]["text/plain"] == "Bold()"
    (result,) = [o for o in cells[2].outputs if o["output_type"] == "execute_result"]
    assert result["data"]["text/html"] == "<b>bold</b>"
    assert cells[3].outputs == []
    assert results_of(cells[4]) == ["84"]
    assert [c.execution_count for c in cells] == [1, 2, 3, 4, 5]
    for o in cells[1].outputs + cells[4].outputs:
        if o["output_type"] == "execute_result":
            assert o["execution_count"] in (2, 5)


def test_matplotlib_png():
    pytest.importorskip("matplotlib")

    async def body(ex):
        return await ex.run(
            "import matplotlib.pyplot as plt\n"
            "plt.plot([1, 3, 2])\n"
            "plt.title('agent plot')\n"
            "plt.show()")  # fmt: skip

    cell = run_agent(body)
    pngs = [o["data"]["image/png"] for o in cell.outputs if o["output_type"] == "display_data"
            and "image/png" in o["data"]]  # fmt: skip
    assert len(pngs) == 1, cell.outputs
    assert base64.b64decode(pngs[0]).startswith(b"\x89PNG\r\n\x1a\n")


def test_error_raises_cell_execution_error_and_state_survives():
    from nbclient.exceptions import CellExecutionError

    async def body(ex):
        await ex.run("a = 1")
        with pytest.raises(CellExecutionError) as info:
            await ex.run("print('before')\nraise ValueError('bad value ' + str(a))")
        failed = ex.client.nb.cells[-1]
        after = await ex.run("a + 1")
        return info.value, failed, after

    err, failed, after = run_agent(body)
    assert err.ename == "ValueError" and err.evalue == "bad value 1"
    assert "ValueError" in str(err)
    assert text_of(failed) == "before\n"
    assert [o["ename"] for o in failed.outputs if o["output_type"] == "error"] == ["ValueError"]
    assert results_of(after) == ["2"]


def test_allow_errors_gives_error_outputs():
    """AutoGen runs with allow_errors: the error is an output of the cell, not an exception."""

    async def body(ex):
        failed = await ex.run("1 / 0")
        after = await ex.run("'still here'")
        return failed, after

    failed, after = run_agent(body, allow_errors=True)
    (err,) = [o for o in failed.outputs if o["output_type"] == "error"]
    assert err["ename"] == "ZeroDivisionError" and err["traceback"]
    assert results_of(after) == ["'still here'"]


@pytest.mark.timeout(120)
def test_timeout_interrupts_and_keeps_state():
    """timeout=1 with interrupt_on_timeout: the sleeping cell is interrupted (KeyboardInterrupt, raised as
    CellExecutionError), promptly, and the next cell sees what earlier cells defined."""
    from nbclient.exceptions import CellExecutionError

    async def body(ex):
        await ex.run("import time\nkept = 'state'")
        t0 = time.monotonic()
        with pytest.raises(CellExecutionError) as info:
            await ex.run("print('sleeping')\ntime.sleep(30)")
        took = time.monotonic() - t0
        after = await ex.run("kept + ' kept'")
        return info.value, took, ex.client.nb.cells[-2], after

    err, took, interrupted, after = run_agent(body, timeout=1, interrupt_on_timeout=True)
    assert err.ename == "KeyboardInterrupt", err
    assert took < 10, took
    assert text_of(interrupted) == "sleeping\n"
    assert results_of(after) == ["'state kept'"]


@pytest.mark.timeout(120)
def test_timeout_without_interrupt_then_interrupt_by_hand():
    """MetaGPT's way: CellTimeoutError, then km.interrupt_kernel() itself and a second's pause (a cell sent
    while the interrupted one is still ending would be aborted by its stop_on_error, under any kernel); the
    kernel answers the next cell with its state."""
    from nbclient.exceptions import CellTimeoutError

    async def body(ex):
        await ex.run("import time\nkept = 41")
        with pytest.raises(CellTimeoutError):
            await ex.run("time.sleep(30)")
        await ex.client.km.interrupt_kernel()
        await asyncio.sleep(1)
        # A loaded machine can make the pause too short: the interrupted cell must have ended before the next is
        # sent.  Its reply says so (nbclient left it on the shell channel); a cell that had not started when the
        # signal came is interrupted again.
        interrupted = None
        for wait in (10, 30):
            try:
                while interrupted is None:
                    msg = await ex.client.kc.get_shell_msg(timeout=wait)
                    if msg["msg_type"] == "execute_reply":
                        interrupted = msg["content"]
                break
            except queue.Empty:
                await ex.client.km.interrupt_kernel()
        assert interrupted is not None and interrupted.get("ename") == "KeyboardInterrupt", interrupted
        t0 = time.monotonic()
        ex.client.timeout = 30
        after = await ex.run("kept + 1")
        return after, time.monotonic() - t0

    after, took = run_agent(body, timeout=1)
    assert results_of(after) == ["42"]
    assert took < 10, took


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["os._exit", "segfault"])
def test_dying_kernel_raises_dead_kernel_error(how):
    """A kernel that dies in a cell ends the wait with DeadKernelError, promptly.  pyc, when it dies of a
    signal, first answers the cell with an error KernelDied (the signal and the Python traceback, which the
    agent can read) and the next cell gets DeadKernelError; os._exit leaves it no time to say anything."""
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    code = {
        "os._exit": "import os\nprint('going')\nos._exit(1)",
        "segfault": "import ctypes\nctypes.string_at(0)",
    }[how]

    async def body(ex):
        await ex.run("x = 1")
        pid = ex.pids[0]
        t0 = time.monotonic()
        told = None
        try:
            await ex.run(code)
        except CellExecutionError as e:
            told = e
            with pytest.raises(DeadKernelError):
                await ex.run("x")
        except DeadKernelError:
            pass
        else:
            pytest.fail("the cell that killed the kernel returned")
        return told, time.monotonic() - t0, pid

    told, took, pid = run_agent(body)
    assert took < 15, took
    assert not pid_alive(pid)
    if IS_PYC and how == "segfault":
        assert told is not None and told.ename == "KernelDied", told
        assert "Segmentation fault" in told.evalue and "string_at" in str(told)
    else:
        assert told is None, told


def test_notebook_is_valid_after_a_session():
    """The notebook the executor built is a valid nbformat 4 notebook (MetaGPT saves it)."""

    async def body(ex):
        await ex.run("print(1)")
        await ex.run("2")
        return ex.client.nb

    nb = run_agent(body)
    nbformat.validate(nb)
    assert [c.execution_count for c in nb.cells] == [1, 2]
