"""The kernel's asyncio event loop: one for the life of the kernel, running cells' awaits and, between
requests, the tasks and callbacks they left behind.

  * A cell with a top-level await runs as one coroutine on the loop (run_cell): the statements before the
    await are inside it too, so `t = asyncio.create_task(f())` then `await t` works, and a task made in
    one cell can be awaited in another.
  * A plain cell runs with no loop running, as a script does: asyncio.run() and loop.run_until_complete()
    work there (ipykernel refuses both).  asyncio.get_event_loop() is the kernel's loop, and
    asyncio.create_task() called from such a cell, on the main thread, schedules the task on it (ipykernel
    allows that because its cells run inside its loop).
  * While the kernel waits for requests, it waits on the shell socket, the request queue and the loop's
    selector at once (pending() gives the selector and the time to the loop's next timer), and calls
    step() whenever the selector or the timer is due: no polling, tasks and callbacks (also those that
    threads hand over with call_soon_threadsafe) run on time, and requests are answered as they come.

The loop is made when asyncio is first imported (install, called by the kernel's importer) or a cell first
awaits; a kernel whose code never touches asyncio has none and pays nothing.  Between requests the loop
runs user code: its output goes to the last request, as in ipykernel.
"""

import sys

import _pyc

_loop = None
_asyncio = None


def loop():
    """The kernel's loop, made on first use and set as the main thread's current loop."""
    global _loop, _asyncio
    if _asyncio is None:
        import asyncio

        _asyncio = asyncio
    if _loop is None or _loop.is_closed():
        _loop = _asyncio.new_event_loop()
        _pyc.async_loop(True)
    # asyncio.run() in a plain cell leaves no current loop behind: the kernel's becomes current again.
    if not _on_main_thread():
        return _loop
    try:
        current = _asyncio.get_event_loop_policy()._local._loop
    except AttributeError:
        current = None
    if current is not _loop:
        _asyncio.set_event_loop(_loop)
    return _loop


def install(module):
    """Run when asyncio is imported: makes the loop, and lets create_task() from plain cells use it."""
    global _asyncio
    _asyncio = module
    real = module.tasks.create_task

    def create_task(coro, *, name=None, context=None):
        extra = {} if context is None else {"context": context}
        try:
            module.events.get_running_loop()
        except RuntimeError:
            if _pyc.cell_running() and _on_main_thread():
                return loop().create_task(coro, name=name, **extra)
        return real(coro, name=name, **extra)

    create_task.__doc__ = real.__doc__
    create_task.__wrapped__ = real
    module.create_task = module.tasks.create_task = create_task
    if _on_main_thread():
        loop()


_threads = None


def _thread_loop():
    """The calling thread's own loop, made on first use, kept for the thread's later cells."""
    global _threads
    import asyncio
    import threading

    if _threads is None:
        _threads = threading.local()
    lp = getattr(_threads, "loop", None)
    if lp is None or lp.is_closed():
        lp = _threads.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(lp)
    return lp


def _on_main_thread():
    import threading

    return threading.current_thread() is threading.main_thread()


def run_cell(codes, globals_):
    """Runs the code objects of a cell in order, awaiting those that are coroutines, on the kernel's loop --
    or, on a subshell's thread (the kernel's loop belongs to the main thread), on that thread's own loop."""
    from inspect import CO_COROUTINE

    lp = loop() if _on_main_thread() else _thread_loop()

    async def cell():
        for code in codes:
            r = eval(code, globals_)
            if code.co_flags & CO_COROUTINE:
                await r

    return lp.run_until_complete(cell())


def pending():
    """(selector fd, timeout in ms) for the wait between requests, or None when there is no loop to run.
    The timeout is 0 when callbacks are ready, -1 when only the selector can wake the loop."""
    lp = _loop
    if lp is None or lp.is_closed() or lp.is_running():
        return None
    loop()          # current again, should a cell have left another loop current
    try:
        ready, scheduled, fd = lp._ready, lp._scheduled, lp._selector.fileno()
    except AttributeError:
        return (-1, 10) if _asyncio.all_tasks(lp) else None   # a loop of another kind: look every 10 ms
    if ready:
        return (fd, 0)
    if scheduled:
        return (fd, max(0, int((scheduled[0].when() - lp.time()) * 1000) + 1))
    # Nothing due: the selector alone can wake the loop (a watched socket, or call_soon_threadsafe from a
    # thread, which writes to the loop's own pipe).
    return (fd, -1)


def step():
    """Runs one pass of the loop: what is ready, and what the selector has (it does not wait).  Called after
    pending(), which made the loop current."""
    lp = _loop
    lp.call_soon(lp.stop)
    try:
        lp.run_forever()
    except BaseException:
        print("pyc: the asyncio loop raised between requests:", file=sys.stderr)
        import traceback

        traceback.print_exc()
