/*
 * pystream.c -- sys.stdout and sys.stderr as C objects that hand text to the kernel's streams.
 *
 * A write costs one UTF-8 conversion (cached by str objects) and an append under the streams lock; no
 * message is made per write (stream.c coalesces).  `buffer` is a binary twin, for code that writes bytes to
 * sys.stdout.buffer.  fileno() returns the real descriptor 1 or 2, which the kernel has turned into a pipe,
 * so os.write(sys.stdout.fileno(), ...) is captured too.
 *
 * A thread that a cell started writes to that cell (route), as ipykernel 7 does: pyc._threads gives each
 * new thread the request of the cell that started it (_pyc.set_thread_parent).
 */
#include "pyint.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <structmember.h>

/* The request whose cell started the calling thread (set by pyc._threads when a thread starts): that
 * thread's output goes to that cell, even when another cell runs by then.  Its text is handed over a line at
 * a time (print writes its pieces one by one, and each hand-over to an earlier cell is a message of its
 * own): up to the last newline, or when 8 KiB wait, or on flush().  One per thread, flushed and freed with
 * it. */
#define THREAD_LINE_MAX 8192

typedef struct {
    char *pending[2];            /* stdout, stderr text not handed over yet */
    size_t used[2], cap[2];
    size_t len;
    char header[];               /* the request's header frame, as received */
} thread_parent_t;

static pthread_key_t parent_key;
static pthread_once_t parent_once = PTHREAD_ONCE_INIT;

/* Hands over the first n pending bytes of stream which. */
static void
hand_over(thread_parent_t *tp, int which, size_t n)
{
    if (n == 0)
        return;
    pyc__py_host.stream_write_for(pyc__py_host.ctx, which, tp->pending[which], n, tp->header, tp->len);
    memmove(tp->pending[which], tp->pending[which] + n, tp->used[which] - n);
    tp->used[which] -= n;
}

static void
thread_parent_free(void *p)
{
    thread_parent_t *tp = p;
    for (int w = 0; w < 2; w++) {
        hand_over(tp, w, tp->used[w]);
        free(tp->pending[w]);
    }
    free(tp);
}

static void
make_parent_key(void)
{
    if (pthread_key_create(&parent_key, thread_parent_free) != 0)
        abort();                 /* at start-up, with keys to spare: cannot happen */
}

/* Hands text to the kernel for the calling thread's cell. */
static void
route(int which, const char *p, size_t n)
{
    thread_parent_t *tp = pthread_getspecific(parent_key);
    if (tp == NULL || pyc__py_host.stream_write_for == NULL) {
        pyc__py_host.stream_write(pyc__py_host.ctx, which, p, n);
        return;
    }
    if (tp->used[which] + n > tp->cap[which]) {
        size_t cap = tp->used[which] + n < THREAD_LINE_MAX ? THREAD_LINE_MAX : tp->used[which] + n;
        char *grown = realloc(tp->pending[which], cap);
        if (grown == NULL) {
            hand_over(tp, which, tp->used[which]);
            pyc__py_host.stream_write_for(pyc__py_host.ctx, which, p, n, tp->header, tp->len);
            return;
        }
        tp->pending[which] = grown;
        tp->cap[which] = cap;
    }
    memcpy(tp->pending[which] + tp->used[which], p, n);
    tp->used[which] += n;
    if (tp->used[which] >= THREAD_LINE_MAX) {
        hand_over(tp, which, tp->used[which]);
        return;
    }
    size_t last = tp->used[which];
    while (last > 0 && tp->pending[which][last - 1] != '\n')
        last--;
    hand_over(tp, which, last);
}

/* Hands over what the calling thread's cell still waits for. */
static void
route_flush(void)
{
    thread_parent_t *tp = pthread_getspecific(parent_key);
    for (int w = 0; tp != NULL && w < 2; w++)
        hand_over(tp, w, tp->used[w]);
}

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
            route(self->which, p, (size_t)n);
            return PyLong_FromSsize_t(PyUnicode_GET_LENGTH(arg));
        }
        /* Lone surrogates cannot be UTF-8: write them escaped rather than fail. */
        PyErr_Clear();
        PyObject *b = PyUnicode_AsEncodedString(arg, "utf-8", "backslashreplace");
        if (b == NULL)
            return NULL;
        route(self->which, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
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
    route(self->which, view.buf, (size_t)view.len);
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
    route_flush();
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

/* _pyc.thread_parent(): the header (bytes) of the request the calling thread's output goes to: its own
 * cell's when a cell started it, else the current request's; None before the first request. */
static PyObject *
py_thread_parent(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    thread_parent_t *tp = pthread_getspecific(parent_key);
    if (tp != NULL)
        return PyBytes_FromStringAndSize(tp->header, (Py_ssize_t)tp->len);
    char *copy = NULL;
    size_t len = pyc__py_host.parent_copy != NULL ? pyc__py_host.parent_copy(pyc__py_host.ctx, &copy) : 0;
    if (copy == NULL)
        Py_RETURN_NONE;
    PyObject *r = PyBytes_FromStringAndSize(copy, (Py_ssize_t)len);
    free(copy);
    return r;
}

/* Sets the calling thread's parent (NULL: none).  Returns 0, or -1 when memory runs out (nothing changed). */
static int
set_thread_parent(const char *header, size_t len)
{
    thread_parent_t *tp = NULL;
    if (header != NULL) {
        tp = calloc(1, sizeof *tp + len);
        if (tp == NULL)
            return -1;
        tp->len = len;
        memcpy(tp->header, header, len);
    }
    pthread_once(&parent_once, make_parent_key);
    thread_parent_t *old = pthread_getspecific(parent_key);
    if (old != NULL)
        thread_parent_free(old);
    pthread_setspecific(parent_key, tp);
    return 0;
}

void
pyc_py_thread_parent(const char *header, size_t len)
{
    if (set_thread_parent(header, len) < 0)
        set_thread_parent(NULL, 0);   /* out of memory: at least no output goes to the previous request */
}

/* _pyc.set_thread_parent(header or None): where the calling thread's output goes from now on. */
static PyObject *
py_set_thread_parent(PyObject *self, PyObject *arg)
{
    (void)self;
    char *p = NULL;
    Py_ssize_t n = 0;
    if (arg != Py_None && PyBytes_AsStringAndSize(arg, &p, &n) < 0)
        return NULL;
    if (set_thread_parent(p, (size_t)n) < 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyMethodDef parent_methods[] = {
    {"thread_parent", (PyCFunction)py_thread_parent, METH_NOARGS, "The request this thread's output goes to."},
    {"set_thread_parent", (PyCFunction)py_set_thread_parent, METH_O, "Send this thread's output to a request."},
    {NULL, NULL, 0, NULL},
};

int
pyc__py_stream_ready(PyObject *module)
{
    pthread_once(&parent_once, make_parent_key);
    if (PyModule_AddFunctions(module, parent_methods) < 0)
        return -1;
    if (PyType_Ready(&stream_type) < 0)
        return -1;
    Py_INCREF(&stream_type);
    if (PyModule_AddObject(module, "Stream", (PyObject *)&stream_type) < 0) {
        Py_DECREF(&stream_type);
        return -1;
    }
    return 0;
}
