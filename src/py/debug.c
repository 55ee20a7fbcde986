/*
 * debug.c -- the interpreter's side of the kernel's other threads: the calls that src/kernel/debugger.c makes
 * into pyc._debugger from its own thread, the tracing of the main thread while a debug session is on, and
 * the interrupt of subshells' threads (src/kernel/subshell.c).
 *
 * These are the only functions of py.h that any thread may call without holding the GIL: each takes it with
 * PyGILState_Ensure around one Python call and gives it back.  While a cell is stopped at a breakpoint its
 * thread waits inside pydevd and lets the GIL go every few milliseconds, so a call here is answered then.
 */
#include "pyint.h"

#include <stdatomic.h>
#include <stdlib.h>

static atomic_int debug_on;      /* a debug session is attached: trace the main thread before its cells */
static int debug_available = -1; /* debugpy can be imported (-1: not asked yet) */

/* With the GIL: pyc._debugger.func(*args); args is a JSON array (NULL: none).  A new reference or NULL with a
 * Python error set. */
static PyObject *
call(const char *func, json_t *args)
{
    PyObject *f = pyc__py_support("pyc._debugger", func);
    if (f == NULL)
        return NULL;
    PyObject *tuple = PyTuple_New(args != NULL ? (Py_ssize_t)json_array_size(args) : 0);
    for (size_t i = 0; tuple != NULL && args != NULL && i < json_array_size(args); i++) {
        PyObject *v = pyc__py_from_json(json_array_get(args, i));
        if (v == NULL) {
            Py_CLEAR(tuple);
            break;
        }
        PyTuple_SET_ITEM(tuple, (Py_ssize_t)i, v);
    }
    PyObject *r = tuple != NULL ? PyObject_CallObject(f, tuple) : NULL;
    Py_XDECREF(tuple);
    return r;
}

/* With the GIL: the pending Python error as err's text ("Type: message"), cleared. */
static void
error_text(pyc_error_t *err)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *s = value != NULL ? PyObject_Str(value) : NULL;
    const char *name = type != NULL ? ((PyTypeObject *)type)->tp_name : "Error";
    const char *text = s != NULL ? PyUnicode_AsUTF8(s) : NULL;
    pyc_error_set(err, "%s: %s", name, text != NULL ? text : "(no message)");
    Py_XDECREF(s);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
}

json_t *
pyc_py_debug_call(const char *func, json_t *args, pyc_error_t *err)
{
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = call(func, args);
    json_t *out = r != NULL && PyDict_Check(r) ? pyc__py_to_json(r) : NULL;
    if (out == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "the debugger's helper did not return a dict");
        error_text(err);
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return out;
}

json_t *
pyc_py_debug_rich(json_t *which, pyc_error_t *err)
{
    PyGILState_STATE g = PyGILState_Ensure();
    json_t *args = json_pack("[O]", which);
    PyObject *obj = args != NULL ? call("value_of", args) : NULL;
    json_decref(args);
    json_t *md = NULL, *out = NULL;
    json_t *data = obj != NULL ? pyc__py_format_json(obj, &md) : NULL;
    if (data != NULL)
        out = json_pack("{s:o, s:o}", "data", data, "metadata", md);
    if (out == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "the value has no representation");
        error_text(err);
    }
    Py_XDECREF(obj);
    PyGILState_Release(g);
    return out;
}

bool
pyc_py_debugger_available(void)
{
    if (debug_available < 0) {
        /* importlib.util.find_spec, which site has imported already: importing pyc._debugger here would cost
         * the kernel's start 6 ms (its source and pyc._shell's compiled), the path lookup 0.2 ms. */
        PyGILState_STATE g = PyGILState_Ensure();
        PyObject *util = PyImport_ImportModule("importlib.util");
        PyObject *spec = util != NULL ? PyObject_CallMethod(util, "find_spec", "s", "debugpy") : NULL;
        debug_available = spec != NULL && spec != Py_None;
        Py_XDECREF(spec);
        Py_XDECREF(util);
        PyErr_Clear();
        PyGILState_Release(g);
    }
    return debug_available == 1;
}

void
pyc_py_debug_session(bool on)
{
    atomic_store(&debug_on, on ? 1 : 0);
}

void
pyc__py_debug_forget(void)
{
    if (!atomic_exchange(&debug_on, 0))
        return;
    /* The parent's tracer (pydevd's) would wait for pydevd threads that do not exist in this process. */
    PyObject *sys = PyImport_ImportModule("sys");
    PyObject *r = sys != NULL ? PyObject_CallMethod(sys, "settrace", "O", Py_None) : NULL;
    Py_XDECREF(r);
    Py_XDECREF(sys);
    PyErr_Clear();
}

bool
pyc__py_debugging(void)
{
    return atomic_load(&debug_on) != 0;
}

void
pyc__py_debug_trace(void)
{
    if (!atomic_load(&debug_on))
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = call("trace_this_thread", NULL);
    if (r == NULL)
        pyc__py_report("tracing the cell for the debugger");
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
}

/* A thread's Python state kept between its requests (pyc_py_thread_begin). */
struct pyc_py_thread {
    PyGILState_STATE gil;
    PyThreadState *ts;
};

pyc_py_thread_t *
pyc_py_thread_begin(void)
{
    pyc_py_thread_t *t = malloc(sizeof *t);
    if (t == NULL)
        return NULL;
    t->gil = PyGILState_Ensure();
    t->ts = PyEval_SaveThread();
    return t;
}

void
pyc_py_thread_end(pyc_py_thread_t *t)
{
    if (t == NULL)
        return;
    PyEval_RestoreThread(t->ts);
    PyGILState_Release(t->gil);
    free(t);
}

unsigned long
pyc_py_thread_ident(void)
{
    return PyThread_get_thread_ident();
}

/* The subshell cells running now, each with its thread's Python ident; only touched with the GIL held. */
typedef struct {
    unsigned long ident, token;
} in_cell_t;
static in_cell_t *in_cell;
static size_t n_in_cell, cap_in_cell;

void
pyc__py_in_cell(bool entering, unsigned long token)
{
    unsigned long me = PyThread_get_thread_ident();
    if (entering) {
        if (n_in_cell == cap_in_cell) {
            size_t c = cap_in_cell == 0 ? 8 : cap_in_cell * 2;
            in_cell_t *grown = realloc(in_cell, c * sizeof *grown);
            if (grown == NULL)
                return;          /* not interruptible then; nothing worse */
            in_cell = grown;
            cap_in_cell = c;
        }
        in_cell[n_in_cell++] = (in_cell_t){me, token};
        return;
    }
    for (size_t i = 0; i < n_in_cell; i++) {
        if (in_cell[i].ident == me) {
            in_cell[i] = in_cell[--n_in_cell];
            break;
        }
    }
    /* An interrupt that came too late for the cell must not hit what the thread does next. */
    PyThreadState_SetAsyncExc(me, NULL);
}

void
pyc_py_interrupt_cells(const unsigned long *tokens, size_t n)
{
    PyGILState_STATE g = PyGILState_Ensure();
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n_in_cell; j++) {
            if (in_cell[j].token == tokens[i]) {
                PyThreadState_SetAsyncExc(in_cell[j].ident, PyExc_KeyboardInterrupt);
                break;
            }
        }
    }
    PyGILState_Release(g);
}
