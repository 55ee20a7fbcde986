"""Output of threads goes to the cell that started them.

Run when `threading` is imported (by the kernel's importer): Thread.start notes the request whose output
the starting thread goes to (its own cell's, or the running cell's), and the new thread, as it begins,
tells the kernel (_pyc.set_thread_parent), so that what it prints after its cell has ended still appears
in that cell and not in whichever cell runs then.  Threads that run work for many cells (a thread pool's
workers) keep the cell of the one that started them.
"""

import _pyc


def _own_main_thread(threading):
    """threading takes the thread that first imports it for the main thread.  When that is a subshell's, the
    kernel's main thread becomes threading.main_thread() again, with a lock of its own that says it lives
    (the one threading made belongs to the subshell thread's state) until threading._shutdown releases it."""
    import _thread
    import os

    main, mt = _pyc.main_thread_ident(), threading._main_thread
    if mt.ident == main:
        return
    with threading._active_limbo_lock:
        threading._active.pop(mt.ident, None)
        mt._ident = main
        mt._native_id = os.getpid()
        lock = _thread.allocate_lock()
        lock.acquire()
        mt._tstate_lock = lock
        threading._active[main] = mt


def install(threading):
    _own_main_thread(threading)
    Thread = threading.Thread
    start, bootstrap = Thread.start, Thread._bootstrap_inner

    def pyc_start(self):
        try:
            self._pyc_parent = _pyc.thread_parent()
        except Exception:
            self._pyc_parent = None
        return start(self)

    def pyc_bootstrap_inner(self):
        parent = getattr(self, "_pyc_parent", None)
        if parent is not None:
            _pyc.set_thread_parent(parent)
        return bootstrap(self)

    pyc_start.__doc__ = start.__doc__
    Thread.start = pyc_start
    Thread._bootstrap_inner = pyc_bootstrap_inner
