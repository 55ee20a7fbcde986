"""Output of threads goes to the cell that started them.

Run when `threading` is imported (by the kernel's importer): Thread.start notes the request whose output
the starting thread goes to (its own cell's, or the running cell's), and the new thread, as it begins,
tells the kernel (_pyc.set_thread_parent), so that what it prints after its cell has ended still appears
in that cell and not in whichever cell runs then.  Threads that run work for many cells (a thread pool's
workers) keep the cell of the one that started them.
"""

import _pyc


def install(threading):
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
