/*
 * support.c -- the bottom of src/py: the state every file of the bridge reads (the kernel's callbacks, the
 * running cells, the SIGINT flags, the package's finder, the main thread's ident) and two helpers every
 * file calls (the package's functions looked up once, an interrupt made pending again).  It calls no other
 * file of src/py, so that the files above it form no circle (init.c, which sets this state up, is at the
 * top).
 */
#include "pyint.h"

#include <string.h>

pyc_py_host_t pyc__py_host;
pyc__py_cell_t pyc__py_cell;
_Thread_local pyc__py_cell_t *pyc__py_subcell;
volatile sig_atomic_t pyc__py_interrupted;
volatile sig_atomic_t pyc__py_executing;
PyObject *pyc__py_finder;         /* the boot finder (init.c), kept for the after-cell hook */
unsigned long pyc__py_main_ident; /* the Python ident of the thread pyc_py_init ran on */

PyObject *
pyc__py_support(const char *module, const char *name)
{
    /* The kernel calls a dozen functions of its package; each is looked up once, with the GIL held.  module
     * and name are string literals, so the table keeps the pointers. */
    static struct {
        const char *module, *name;
        PyObject *func;
    } cache[32];
    static size_t used;
    for (size_t i = 0; i < used; i++) {
        if (strcmp(cache[i].module, module) == 0 && strcmp(cache[i].name, name) == 0)
            return cache[i].func;
    }
    PyObject *mod = PyImport_ImportModule(module);
    PyObject *func = mod != NULL ? PyObject_GetAttrString(mod, name) : NULL;
    Py_XDECREF(mod);
    if (func != NULL && used < sizeof cache / sizeof cache[0]) {
        cache[used].module = module;
        cache[used].name = name;
        cache[used++].func = func;
    }
    return func;              /* a reference the table keeps, or, past its size, one that is never freed */
}

void
pyc__py_interrupt_reassert(void)
{
    if (pyc__py_executing && pyc__py_interrupted && PyThread_get_thread_ident() == pyc__py_main_ident)
        PyErr_SetInterrupt();
}
