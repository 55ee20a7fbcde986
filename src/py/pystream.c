/*
 * pystream.c -- sys.stdout and sys.stderr as C objects that hand text to the kernel's streams.
 *
 * A write costs one UTF-8 conversion (cached by str objects) and an append under the streams lock; no
 * message is made per write (stream.c coalesces).  `buffer` is a binary twin, for code that writes bytes to
 * sys.stdout.buffer.  fileno() returns the real descriptor 1 or 2, which the kernel has turned into a pipe,
 * so os.write(sys.stdout.fileno(), ...) is captured too.
 */
#include "pyint.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    int which;                   /* 0 stdout, 1 stderr */
    int binary;                  /* the .buffer twin: accepts bytes-like objects */
    PyObject *buffer;            /* the twin, made on first use (text streams only) */
} stream_t;

static PyTypeObject stream_type;

PyObject *
pyc__py_stream_new(int which)
{
    stream_t *s = PyObject_New(stream_t, &stream_type);
    if (s == NULL)
        return NULL;
    s->which = which;
    s->binary = 0;
    s->buffer = NULL;
    return (PyObject *)s;
}

static void
stream_dealloc(stream_t *self)
{
    Py_XDECREF(self->buffer);
    PyObject_Free(self);
}

static PyObject *
stream_write(stream_t *self, PyObject *arg)
{
    if (PyUnicode_Check(arg)) {
        if (self->binary) {
            PyErr_SetString(PyExc_TypeError, "a bytes-like object is required, not 'str'");
            return NULL;
        }
        Py_ssize_t n;
        const char *p = PyUnicode_AsUTF8AndSize(arg, &n);
        if (p != NULL) {
            pyc__py_host.stream_write(pyc__py_host.ctx, self->which, p, (size_t)n);
            return PyLong_FromSsize_t(PyUnicode_GET_LENGTH(arg));
        }
        /* Lone surrogates cannot be UTF-8: write them escaped rather than fail. */
        PyErr_Clear();
        PyObject *b = PyUnicode_AsEncodedString(arg, "utf-8", "backslashreplace");
        if (b == NULL)
            return NULL;
        pyc__py_host.stream_write(pyc__py_host.ctx, self->which, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
        Py_DECREF(b);
        return PyLong_FromSsize_t(PyUnicode_GET_LENGTH(arg));
    }
    if (!self->binary) {
        PyErr_Format(PyExc_TypeError, "write() argument must be str, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    pyc__py_host.stream_write(pyc__py_host.ctx, self->which, view.buf, (size_t)view.len);
    Py_ssize_t len = view.len;
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(len);
}

static PyObject *
stream_writelines(stream_t *self, PyObject *lines)
{
    PyObject *it = PyObject_GetIter(lines), *item;
    if (it == NULL)
        return NULL;
    while ((item = PyIter_Next(it)) != NULL) {
        PyObject *r = stream_write(self, item);
        Py_DECREF(item);
        if (r == NULL) {
            Py_DECREF(it);
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
stream_flush(stream_t *self, PyObject *unused)
{
    (void)unused;
    pyc__py_host.stream_flush(pyc__py_host.ctx);
    Py_RETURN_NONE;
}

static PyObject *
stream_fileno(stream_t *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(self->which + 1);
}

static PyObject *
stream_false(stream_t *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_RETURN_FALSE;
}

static PyObject *
stream_true(stream_t *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_RETURN_TRUE;
}

static PyObject *
stream_none(stream_t *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_RETURN_NONE;
}

static PyObject *
stream_get_buffer(stream_t *self, void *closure)
{
    (void)closure;
    if (self->binary) {
        PyErr_SetString(PyExc_AttributeError, "binary stream has no buffer");
        return NULL;
    }
    if (self->buffer == NULL) {
        stream_t *b = (stream_t *)pyc__py_stream_new(self->which);
        if (b == NULL)
            return NULL;
        b->binary = 1;
        self->buffer = (PyObject *)b;
    }
    Py_INCREF(self->buffer);
    return self->buffer;
}

static PyObject *
stream_get_name(stream_t *self, void *closure)
{
    (void)closure;
    return PyUnicode_FromString(self->which == 0 ? "<stdout>" : "<stderr>");
}

static PyObject *
stream_get_const(stream_t *self, void *closure)
{
    (void)self;
    const char *what = closure;
    if (strcmp(what, "encoding") == 0)
        return PyUnicode_FromString("utf-8");
    if (strcmp(what, "errors") == 0)
        return PyUnicode_FromString("backslashreplace");
    if (strcmp(what, "mode") == 0)
        return PyUnicode_FromString(self->binary ? "wb" : "w");
    if (strcmp(what, "closed") == 0 || strcmp(what, "line_buffering") == 0)
        Py_RETURN_FALSE;
    Py_RETURN_NONE;
}

static PyObject *
stream_repr(stream_t *self)
{
    return PyUnicode_FromFormat("<pyc %s stream %s>", self->binary ? "binary" : "text",
                                self->which == 0 ? "stdout" : "stderr");
}

static PyMethodDef stream_methods[] = {
    {"write", (PyCFunction)stream_write, METH_O, "Write text (bytes for .buffer); returns the length."},
    {"writelines", (PyCFunction)stream_writelines, METH_O, "Write each item of an iterable."},
    {"flush", (PyCFunction)stream_flush, METH_NOARGS, "Publish pending output now."},
    {"fileno", (PyCFunction)stream_fileno, METH_NOARGS, "The captured file descriptor (1 or 2)."},
    {"isatty", (PyCFunction)stream_false, METH_NOARGS, "Always False."},
    {"readable", (PyCFunction)stream_false, METH_NOARGS, "Always False."},
    {"seekable", (PyCFunction)stream_false, METH_NOARGS, "Always False."},
    {"writable", (PyCFunction)stream_true, METH_NOARGS, "Always True."},
    {"close", (PyCFunction)stream_none, METH_NOARGS, "Does nothing: the kernel's streams stay open."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stream_getset[] = {
    {"buffer", (getter)stream_get_buffer, NULL, "The binary stream under this text stream.", NULL},
    {"name", (getter)stream_get_name, NULL, NULL, NULL},
    {"encoding", (getter)stream_get_const, NULL, NULL, "encoding"},
    {"errors", (getter)stream_get_const, NULL, NULL, "errors"},
    {"mode", (getter)stream_get_const, NULL, NULL, "mode"},
    {"closed", (getter)stream_get_const, NULL, NULL, "closed"},
    {"line_buffering", (getter)stream_get_const, NULL, NULL, "line_buffering"},
    {"newlines", (getter)stream_get_const, NULL, NULL, "newlines"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject stream_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_pyc.Stream",
    .tp_basicsize = sizeof(stream_t),
    .tp_dealloc = (destructor)stream_dealloc,
    .tp_repr = (reprfunc)stream_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An output stream of the pyc kernel, published as Jupyter stream messages.",
    .tp_methods = stream_methods,
    .tp_getset = stream_getset,
};

int
pyc__py_stream_ready(PyObject *module)
{
    if (PyType_Ready(&stream_type) < 0)
        return -1;
    Py_INCREF(&stream_type);
    if (PyModule_AddObject(module, "Stream", (PyObject *)&stream_type) < 0) {
        Py_DECREF(&stream_type);
        return -1;
    }
    return 0;
}
