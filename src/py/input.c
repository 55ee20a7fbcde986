/*
 * input.c -- the _pyc functions a running cell calls to reach its frontend: input() and getpass() (an
 * input_request on stdin), add_payload() (a payload in the cell's execute_reply), and parent() (the request
 * that output goes to).
 *
 * input() and getpass() release the GIL while the host waits for the reply, so other threads run; an interrupt
 * during the wait raises KeyboardInterrupt in the cell.  Outside a cell, or when the request said allow_stdin
 * false, they raise StdinNotImplementedError, as ipykernel does.
 */
#include "pyint.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static PyObject *
read_line(PyObject *prompt_obj, bool password)
{
    const char *prompt = "";
    PyObject *ps = NULL;
    if (prompt_obj != NULL && prompt_obj != Py_None) {
        ps = PyObject_Str(prompt_obj);
        if (ps == NULL)
            return NULL;
        prompt = PyUnicode_AsUTF8(ps);
        if (prompt == NULL) {
            Py_DECREF(ps);
            return NULL;
        }
    }
    if (!pyc__py_here()->running || !pyc__py_here()->allow_stdin) {
        Py_XDECREF(ps);
        PyObject *mod = PyImport_ImportModule("_pyc");
        PyObject *exc = mod != NULL ? PyObject_GetAttrString(mod, "StdinNotImplementedError") : NULL;
        Py_XDECREF(mod);
        PyErr_SetString(exc != NULL ? exc : PyExc_RuntimeError,
                        "input() was called, but this frontend does not support input requests "
                        "(allow_stdin is false)");
        Py_XDECREF(exc);
        return NULL;
    }
    char *line = NULL;
    pyc_error_t err;
    char *prompt_copy = strdup(prompt);
    Py_XDECREF(ps);
    if (prompt_copy == NULL)
        return PyErr_NoMemory();
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pyc__py_host.input(pyc__py_host.ctx, prompt_copy, password, &line, &err);
    Py_END_ALLOW_THREADS
    free(prompt_copy);
    if (rc == 1) {
        if (PyErr_CheckSignals() < 0)
            return NULL;
        PyErr_SetNone(PyExc_KeyboardInterrupt);
        return NULL;
    }
    if (rc < 0) {
        PyErr_SetString(PyExc_RuntimeError, err.text);
        return NULL;
    }
    PyObject *r = PyUnicode_DecodeUTF8(line, (Py_ssize_t)strlen(line), "replace");
    free(line);
    return r;
}

static PyObject *
py_input(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *prompt = NULL;
    if (!PyArg_ParseTuple(args, "|O:input", &prompt))
        return NULL;
    return read_line(prompt, false);
}

static PyObject *
py_getpass(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    /* Python 3.14's getpass.getpass also takes echo_char (what to show for each character typed): the
     * frontend's password field shows what it shows, so it is accepted and not used, as stream is. */
    static char *kwlist[] = {"prompt", "stream", "echo_char", NULL};
    PyObject *prompt = NULL, *stream = NULL, *echo_char = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO$O:getpass", kwlist, &prompt, &stream, &echo_char))
        return NULL;
    if (prompt == NULL) {
        PyObject *p = PyUnicode_FromString("Password: ");
        PyObject *r = read_line(p, true);
        Py_XDECREF(p);
        return r;
    }
    return read_line(prompt, true);
}

/* _pyc.add_payload(dict): adds a payload (e.g. a page of help) to the running cell's execute_reply. */
static PyObject *
py_add_payload(PyObject *self, PyObject *arg)
{
    (void)self;
    if (!PyDict_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "add_payload() takes a dict");
        return NULL;
    }
    json_t *payload = pyc__py_here()->payload;
    if (payload == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "add_payload() outside a cell");
        return NULL;
    }
    json_t *j = pyc__py_to_json(arg);
    if (j == NULL)
        return NULL;
    json_array_append_new(payload, j);
    Py_RETURN_NONE;
}

/* _pyc.parent(): the request that output goes to, as ipykernel's Kernel.get_parent() gives it: {"header",
 * "parent_header", "metadata", "content", "msg_id", "msg_type"}, with the header filled in (the others are
 * empty); None before the first request. */
static PyObject *
py_parent(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    json_t *header = pyc__py_host.parent != NULL ? pyc__py_host.parent(pyc__py_host.ctx) : NULL;
    if (!json_is_object(header)) {
        json_decref(header);
        Py_RETURN_NONE;
    }
    json_t *msg = json_pack("{s:O, s:{}, s:{}, s:{}, s:O?, s:O?}", "header", header, "parent_header", "metadata",
                            "content", "msg_id", json_object_get(header, "msg_id"), "msg_type",
                            json_object_get(header, "msg_type"));
    json_decref(header);
    if (msg == NULL)
        return PyErr_NoMemory();
    PyObject *r = pyc__py_from_json(msg);
    json_decref(msg);
    return r;
}

/* _pyc.kernel_call(op, args_json): an operation of the kernel (pyc._magics' %snapshot, %snapshots,
 * %restore), answered as JSON text. */
static PyObject *
py_kernel_call(PyObject *self, PyObject *args)
{
    (void)self;
    const char *op, *text;
    if (!PyArg_ParseTuple(args, "ss", &op, &text))
        return NULL;
    if (pyc__py_host.kernel_call == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this kernel has no such operation");
        return NULL;
    }
    json_t *a = json_loads(text, JSON_DECODE_ANY, NULL);
    if (a == NULL) {
        PyErr_SetString(PyExc_ValueError, "kernel_call: the arguments are not JSON");
        return NULL;
    }
    json_t *r;
    Py_BEGIN_ALLOW_THREADS
    r = pyc__py_host.kernel_call(pyc__py_host.ctx, op, a);
    Py_END_ALLOW_THREADS
    json_decref(a);
    char *out = r != NULL ? json_dumps(r, JSON_COMPACT) : NULL;
    json_decref(r);
    if (out == NULL)
        return PyErr_NoMemory();
    PyObject *res = PyUnicode_FromString(out);
    free(out);
    return res;
}

/* The connection the kernel serves, {"file", "info"} (pyc_py_set_connection); NULL before it said. */
static json_t *connection;

void
pyc_py_set_connection(const char *path, json_t *info)
{
    json_t *old = connection;
    connection = json_pack("{s:s?, s:o}", "file", path, "info", info);
    json_decref(old);
}

/* _pyc.connection(): {"file": path or None, "info": the connection file's contents}, or None. */
static PyObject *
py_connection(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    if (connection == NULL)
        Py_RETURN_NONE;
    return pyc__py_from_json(connection);
}

PyMethodDef pyc__py_input_methods[] = {
    {"connection", (PyCFunction)py_connection, METH_NOARGS,
     "The connection this kernel serves: {'file': path or None, 'info': dict}, or None."},
    {"kernel_call", (PyCFunction)py_kernel_call, METH_VARARGS, "kernel_call(op, args_json) -> answer_json"},
    {"parent", (PyCFunction)py_parent, METH_NOARGS, "The request that output goes to (its message, header filled)."},
    {"add_payload", (PyCFunction)py_add_payload, METH_O, "Add a payload to the current execute_reply."},
    {"input", (PyCFunction)py_input, METH_VARARGS, "input(prompt='') -> str, asked of the frontend."},
    {"getpass", (PyCFunction)(void (*)(void))py_getpass, METH_VARARGS | METH_KEYWORDS,
     "getpass(prompt='Password: ') -> str, asked of the frontend without echo."},
    {NULL, NULL, 0, NULL},
};
