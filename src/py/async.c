/*
 * async.c -- the C side of the kernel's asyncio loop (pyc._asyncio holds the loop and its policy): running a
 * cell whose code awaits, and giving the loop its turns between requests.
 *
 * The kernel's main loop asks pyc_py_async_pending, before it waits, whether the loop has anything to do;
 * only then does it wait on the loop's selector beside its sockets (kernel/main.c), and call
 * pyc_py_async_step when the selector or the loop's next timer is due.  A kernel that never imports asyncio
 * never makes a loop, and async_active keeps all of this to one atomic load per wait.
 */
#include "pyint.h"

#include <stdatomic.h>

/* Set by pyc._asyncio (_pyc.async_loop) once the loop exists. */
static atomic_bool async_active;

int
pyc__py_run_async(PyObject *codes, PyObject *globals)
{
    PyObject *run = pyc__py_support("pyc._asyncio", "run_cell");
    PyObject *r = run != NULL ? PyObject_CallFunctionObjArgs(run, codes, globals, NULL) : NULL;
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

void
pyc__py_async_current(void)
{
    if (!atomic_load(&async_active))
        return;
    Py_XDECREF(pyc__py_call_support("pyc._asyncio", "loop", "making the kernel's asyncio loop current"));
}

bool
pyc_py_async_active(void)
{
    return atomic_load(&async_active);
}

bool
pyc_py_async_pending(int *fd, int *timeout_ms)
{
    *fd = -1;
    *timeout_ms = -1;
    PyObject *r = pyc__py_call_support("pyc._asyncio", "pending", "asking the asyncio loop for work");
    if (r == NULL)
        return false;
    bool work = r != Py_None && PyArg_ParseTuple(r, "ii", fd, timeout_ms);
    if (!work)
        PyErr_Clear();
    Py_DECREF(r);
    return work;
}

void
pyc_py_async_step(void)
{
    Py_XDECREF(pyc__py_call_support("pyc._asyncio", "step", "the asyncio loop"));
}

/* _pyc.async_loop(True): the kernel's loop exists (pyc._asyncio made it). */
static PyObject *
py_async_loop(PyObject *self, PyObject *arg)
{
    (void)self;
    atomic_store(&async_active, PyObject_IsTrue(arg) == 1);
    Py_RETURN_NONE;
}

/* _pyc.cell_running(): true while a cell (or a request that runs user code) runs. */
static PyObject *
py_cell_running(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyBool_FromLong(pyc__py_cell.running);
}

PyMethodDef pyc__py_async_methods[] = {
    {"async_loop", (PyCFunction)py_async_loop, METH_O, "Tell the kernel that its asyncio loop exists."},
    {"cell_running", (PyCFunction)py_cell_running, METH_NOARGS, "True while a cell runs."},
    {NULL, NULL, 0, NULL},
};
