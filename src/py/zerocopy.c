/*
 * zerocopy.c -- message buffers shared between Python and ZeroMQ without a copy (DESIGN.md section 5: "no
 * extra copy for NumPy data").
 *
 * Sending: _pyc.publish lends the bytes of a large buffer (a NumPy array's memory, a pickle) to the io
 * (pyc_releaser_t in io.h).  The frame holds a buffer export (Py_buffer) of the object until ZeroMQ is done
 * with the bytes, which happens on ZeroMQ's I/O thread once they are on the socket (or inside zmq_msg_send
 * when nobody subscribes).  That thread must not touch Python, so it only pushes the export onto a
 * mutex-guarded list, and the exports are released with the GIL held the next time the main thread enters
 * Python (pyc_py_enter) or anything publishes.  Taking the GIL on the I/O thread instead would stall every
 * socket of the kernel behind whatever C call holds the GIL, and could deadlock at exit, when the main thread
 * finalizes Python while ZeroMQ still holds frames.  Until its export is released the object stays alive
 * (and a bytearray cannot be resized), so the memory of one answer lingers at most until the next request.
 *
 * Contract for senders, as in ipykernel (jupyter_client sends frames of 64 KiB or more without a copy too):
 * the bytes are read after publish returns, so an object changed in place while it is being sent is sent
 * partly changed.  pyc.pickle is safe from that: its receivers check SHA-256 digests taken before the send,
 * and refuse a torn buffer.
 *
 * Receiving: the buffers of a comm message reach Python as writable memoryviews of _pyc.FrameBuffer objects,
 * each holding its own frame's storage (pyc_msg_hold_frame) until the last view of it is gone: once the message
 * is done with, a frame nobody views is freed, whatever other frames of it stay in use.  A NumPy array
 * unpickled from one uses that memory directly, and is writable like the original.
 *
 * Numbers that shaped this (the test machine, 100 MiB): a copy into a fresh block cost 60 ms, 10 ms of memcpy
 * and 50 ms of page faults; the same copy into a bytearray on receipt cost as much again.  Below 64 KiB a copy
 * costs less than the bookkeeping, so small buffers are still copied.
 */
#include "pyint.h"

#include <pthread.h>
#include <string.h>

/* Buffers from this size on are lent and received without a copy. */
#define LEND_MIN ((Py_ssize_t)64 << 10)

/* ---- sending --------------------------------------------------------------------------------------- */

/* A buffer export lent to the io. */
typedef struct lent {
    pyc_releaser_t releaser;     /* first member: the io hands back a pointer to it */
    struct lent *next;           /* in `returned` */
    Py_buffer view;
} lent_t;

/* Exports the io is done with, waiting for the GIL.  Guarded by returned_lock, which is held only to push
 * or to take the whole list, never while calling anything. */
static pthread_mutex_t returned_lock = PTHREAD_MUTEX_INITIALIZER;
static lent_t *returned;

/* The io is done with the bytes: any thread, with or without the GIL. */
static void
lent_return(pyc_releaser_t *r)
{
    lent_t *l = (lent_t *)r;
    pthread_mutex_lock(&returned_lock);
    l->next = returned;
    returned = l;
    pthread_mutex_unlock(&returned_lock);
}

void
pyc__py_release_lent(void)
{
    pthread_mutex_lock(&returned_lock);
    lent_t *all = returned;
    returned = NULL;
    pthread_mutex_unlock(&returned_lock);
    while (all != NULL) {
        lent_t *next = all->next;
        PyBuffer_Release(&all->view);
        free(all);
        all = next;
    }
}

int
pyc__py_lend(PyObject *obj, pyc_outframe_t *frame)
{
    *frame = (pyc_outframe_t){"", 0, NULL, NULL};
    lent_t *l = malloc(sizeof *l);
    if (l == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyObject_GetBuffer(obj, &l->view, PyBUF_SIMPLE) < 0) {
        free(l);
        return -1;
    }
    if (l->view.len >= LEND_MIN) {
        l->releaser.release = lent_return;
        l->next = NULL;
        *frame = (pyc_outframe_t){l->view.buf, (size_t)l->view.len, NULL, &l->releaser};
        return 0;
    }
    int rc = 0;
    if (l->view.len > 0) {
        void *copy = malloc((size_t)l->view.len);
        if (copy == NULL) {
            PyErr_NoMemory();
            rc = -1;
        } else {
            memcpy(copy, l->view.buf, (size_t)l->view.len);
            *frame = (pyc_outframe_t){copy, (size_t)l->view.len, copy, NULL};
        }
    }
    PyBuffer_Release(&l->view);
    free(l);
    return rc;
}

/* A fork while another thread holds returned_lock would leave it locked forever in the child. */
static void
before_fork(void)
{
    pthread_mutex_lock(&returned_lock);
}

static void
after_fork(void)
{
    pthread_mutex_unlock(&returned_lock);
}

/* ---- receiving ------------------------------------------------------------------------------------- */

/* _pyc.FrameBuffer: the bytes of one received frame, writable (once received they are the kernel's own
 * memory), alive as long as this object. */
typedef struct {
    PyObject_HEAD
    pyc_msg_hold_t *hold;
    size_t index;                /* the frame held (pyc_msg_hold_frame) */
    void *data;
    Py_ssize_t size;
} framebuf_t;

static int
framebuf_getbuffer(framebuf_t *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, 0, flags);
}

static void
framebuf_dealloc(framebuf_t *self)
{
    pyc_msg_hold_release_frame(self->hold, self->index);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
framebuf_repr(framebuf_t *self)
{
    return PyUnicode_FromFormat("<_pyc.FrameBuffer of %zd bytes>", self->size);
}

static PyBufferProcs framebuf_as_buffer = {
    .bf_getbuffer = (getbufferproc)framebuf_getbuffer,
};

static PyTypeObject framebuf_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_pyc.FrameBuffer",
    .tp_basicsize = sizeof(framebuf_t),
    .tp_dealloc = (destructor)framebuf_dealloc,
    .tp_repr = (reprfunc)framebuf_repr,
    .tp_as_buffer = &framebuf_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The bytes of a received message frame, shared with the kernel without a copy.",
};

/* One buffer of msg as a memoryview: of a FrameBuffer when it is large and the storage can be held, else of
 * a bytearray copy. */
static PyObject *
buffer_view(const pyc_msg_t *msg, const pyc_frame_t *b)
{
    PyObject *obj = NULL;
    size_t index = SIZE_MAX;
    pyc_msg_hold_t *hold = (Py_ssize_t)b->size >= LEND_MIN ? pyc_msg_hold_frame(msg, b, &index) : NULL;
    if (hold != NULL) {
        framebuf_t *fb = PyObject_New(framebuf_t, &framebuf_type);
        if (fb == NULL) {
            pyc_msg_hold_release_frame(hold, index);
            return NULL;
        }
        fb->hold = hold;
        fb->index = index;
        fb->data = (void *)b->data;
        fb->size = (Py_ssize_t)b->size;
        obj = (PyObject *)fb;
    } else {
        obj = PyByteArray_FromStringAndSize(b->data, (Py_ssize_t)b->size);
        if (obj == NULL)
            return NULL;
    }
    PyObject *view = PyMemoryView_FromObject(obj);
    Py_DECREF(obj);
    return view;
}

PyObject *
pyc__py_msg_buffers(const pyc_msg_t *msg)
{
    PyObject *list = PyList_New((Py_ssize_t)msg->n_buffers);
    if (list == NULL)
        return NULL;
    for (size_t i = 0; i < msg->n_buffers; i++) {
        PyObject *view = buffer_view(msg, &msg->buffers[i]);
        if (view == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, view);
    }
    return list;
}

int
pyc__py_zerocopy_ready(PyObject *module)
{
    static int registered;
    if (!registered) {
        if (pthread_atfork(before_fork, after_fork, after_fork) != 0) {
            PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
            return -1;
        }
        registered = 1;
    }
    if (PyType_Ready(&framebuf_type) < 0)
        return -1;
    Py_INCREF(&framebuf_type);
    if (PyModule_AddObject(module, "FrameBuffer", (PyObject *)&framebuf_type) < 0) {
        Py_DECREF(&framebuf_type);
        return -1;
    }
    return 0;
}
