/*
 * display.c -- sys.displayhook, the display() builtin, and the MIME bundles they publish.
 *
 * The IPython display protocol, without IPython: an object with _ipython_display_ shows itself (nothing else
 * is published for it); otherwise _repr_mimebundle_(include=None, exclude=None) comes first, then text/plain
 * (IPython's pretty layout, pyc._pretty, unless the bundle gave one), then each _repr_<type>_ method for the
 * types still missing; each may return None (skipped), the data, or (data, metadata).  Binary types (PNG,
 * JPEG, PDF) travel base64-encoded, as the spec says.  A repr method that raises is skipped, with the
 * exception printed to stderr: a broken _repr_html_ must not lose the text/plain output.
 *
 * A bundle is kept as two Python dicts (data, metadata) until the message is written: then each value goes
 * to JSON text once, straight into the buffer the message is sent from (json.c), so that a 10 MB repr or HTML
 * is not first copied into a jansson tree.  A value that cannot be written (a reference cycle) is reported
 * and left out, as a broken repr method is.
 */
#include "pyint.h"

#include <string.h>

#include "buf.h"
#include "jsontext.h"
#include "msg.h"

/* _pyc.publish(msg_type, content, metadata=None, buffers=None): publishes any iopub message (comms use it)
 * with the current request as parent; buffers are contiguous bytes-like objects sent as extra frames.  From
 * 64 KiB on a buffer is sent without a copy, read by ZeroMQ after publish returns (zerocopy.c): changing it in
 * place meanwhile changes what is sent. */
static PyObject *
py_publish(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kwlist[] = {"msg_type", "content", "metadata", "buffers", NULL};
    const char *msg_type;
    PyObject *content, *metadata = Py_None, *buffers = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sO|OO:publish", kwlist, &msg_type, &content, &metadata,
                                     &buffers))
        return NULL;
    pyc_buf_t c, md;
    pyc_buf_init(&c, SIZE_MAX / 2);
    pyc_buf_init(&md, SIZE_MAX / 2);
    if (pyc__py_json_text(&c, content) < 0 || (metadata != Py_None && pyc__py_json_text(&md, metadata) < 0)) {
        pyc_buf_free(&c);
        pyc_buf_free(&md);
        return NULL;
    }
    Py_ssize_t nbuf = 0;
    PyObject *seq = NULL;
    pyc_outframe_t *frames = NULL;
    pyc__py_release_lent();       /* what earlier sends gave back: a loop of sends holds one at a time */
    if (buffers != Py_None) {
        seq = PySequence_Fast(buffers, "buffers must be a list of bytes-like objects");
        if (seq == NULL)
            goto fail;
        nbuf = PySequence_Fast_GET_SIZE(seq);
        frames = PyMem_Calloc((size_t)nbuf + 1, sizeof *frames);
        if (frames == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < nbuf; i++) {
            if (pyc__py_lend(PySequence_Fast_GET_ITEM(seq, i), &frames[i]) < 0) {
                nbuf = i;
                goto fail;
            }
        }
    }
    /* Takes over the texts and the frames, sent or not. */
    size_t len;
    char *text = pyc_buf_detach(&c, &len);
    pyc__py_host.publish_text(pyc__py_host.ctx, msg_type, text, len, pyc_buf_detach(&md, NULL), NULL, 0, frames,
                              (size_t)nbuf);
    PyMem_Free(frames);
    Py_XDECREF(seq);
    Py_RETURN_NONE;
fail:
    for (Py_ssize_t i = 0; i < nbuf; i++)
        pyc_outframe_drop(&frames[i]);
    pyc__py_release_lent();
    PyMem_Free(frames);
    Py_XDECREF(seq);
    pyc_buf_free(&c);
    pyc_buf_free(&md);
    return NULL;
}

static int
is_binary_mime(const char *mime)
{
    return strcmp(mime, "image/png") == 0 || strcmp(mime, "image/jpeg") == 0 ||
           strcmp(mime, "application/pdf") == 0;
}

/* One repr result as the value of mime in a bundle (a new reference): bytes of binary types become their base64
 * text, other bytes their text (invalid UTF-8 replaced), anything else stays as it is, written as JSON when the
 * message is.  NULL with a Python error set. */
static PyObject *
mime_value(const char *mime, PyObject *v)
{
    if (PyBytes_Check(v) || PyByteArray_Check(v)) {
        if (is_binary_mime(mime)) {
            PyObject *b64 = PyImport_ImportModule("binascii");
            PyObject *enc = b64 != NULL ? PyObject_CallMethod(b64, "b2a_base64", "O", v) : NULL;
            Py_XDECREF(b64);
            if (enc == NULL)
                return NULL;
            Py_ssize_t elen = PyBytes_GET_SIZE(enc);
            if (elen > 0 && PyBytes_AS_STRING(enc)[elen - 1] == '\n')
                elen--;          /* b2a_base64 ends its output with a newline */
            PyObject *text = PyUnicode_DecodeASCII(PyBytes_AS_STRING(enc), elen, "strict");
            Py_DECREF(enc);
            return text;
        }
        return PyUnicode_FromEncodedObject(v, "utf-8", "replace");
    }
    return Py_NewRef(v);
}

static const struct {
    const char *method;
    const char *mime;
} repr_methods[] = {
    {"_repr_html_", "text/html"},
    {"_repr_markdown_", "text/markdown"},
    {"_repr_svg_", "image/svg+xml"},
    {"_repr_png_", "image/png"},
    {"_repr_jpeg_", "image/jpeg"},
    {"_repr_latex_", "text/latex"},
    {"_repr_json_", "application/json"},
    {"_repr_javascript_", "application/javascript"},
    {"_repr_pdf_", "application/pdf"},
};

/* Adds a dict of MIME type -> data (a bundle) to data, each value through mime_value.  strict: a value that
 * cannot be converted ends it with -1 and the Python error set, and a key that is not a str is converted by
 * str() (a raw bundle the caller gave); otherwise such values are reported on stderr and skipped, as a broken
 * repr method is, and such keys are skipped.  Returns 0 or -1. */
static int
add_mimes(PyObject *data, PyObject *dict, bool strict)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        PyObject *name = PyUnicode_Check(key) ? Py_NewRef(key) : strict ? PyObject_Str(key) : NULL;
        const char *mime = name != NULL ? PyUnicode_AsUTF8(name) : NULL;
        PyObject *v = mime != NULL ? mime_value(mime, value) : NULL;
        int rc = v != NULL ? PyDict_SetItem(data, name, v) : -1;
        Py_XDECREF(v);
        if (rc < 0 && strict) {
            Py_XDECREF(name);
            return -1;
        }
        if (rc < 0 && mime != NULL)
            pyc__py_report(mime);
        else if (rc < 0)
            PyErr_Clear();
        Py_XDECREF(name);
    }
    return 0;
}

/* Adds what one repr method returns; a (data, metadata) pair adds metadata too. */
static void
add_repr(PyObject *data, PyObject *md, const char *mime, PyObject *r)
{
    PyObject *value = r, *meta = NULL;
    if (PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2) {
        value = PyTuple_GET_ITEM(r, 0);
        meta = PyTuple_GET_ITEM(r, 1);
    }
    if (value == Py_None)
        return;
    PyObject *v = mime_value(mime, value);
    if (v == NULL || PyDict_SetItemString(data, mime, v) < 0) {
        Py_XDECREF(v);
        pyc__py_report(mime);
        return;
    }
    Py_DECREF(v);
    if (meta != NULL && meta != Py_None && PyDict_SetItemString(md, mime, meta) < 0)
        PyErr_Clear();
}

/* A repr method of obj as IPython looks it up (get_real_method): a new reference to a callable, or NULL (no
 * error set) when there is none or asking raised. */
static PyObject *
real_method(PyObject *obj, const char *name)
{
    PyObject *m = PyObject_GetAttrString(obj, name);
    if (m == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyCallable_Check(m)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* True for objects that answer every attribute (proxies, mocks): IPython asks them for a canary name that no
 * real object has, and calls none of their repr methods. */
static bool
answers_everything(PyObject *obj)
{
    PyObject *c = PyObject_GetAttrString(obj, "_ipython_canary_method_should_not_exist_");
    if (c == NULL) {
        PyErr_Clear();
        return false;
    }
    Py_DECREF(c);
    return true;
}

/* The text/plain of obj (a new reference to a str): its repr for the builtin scalars, IPython's layout
 * (pyc._pretty) for the rest; the repr when the layout fails, and a placeholder when the repr fails too
 * (reported on stderr). */
static PyObject *
plain_text(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    bool scalar = t == &PyLong_Type || t == &PyFloat_Type || t == &PyUnicode_Type || t == &PyBool_Type ||
                  obj == Py_None || t == &PyComplex_Type || t == &PyBytes_Type;
    PyObject *text = NULL;
    if (!scalar) {
        PyObject *pretty = pyc__py_support("pyc._pretty", "pretty");
        text = pretty != NULL ? PyObject_CallOneArg(pretty, obj) : NULL;
        if (text == NULL)
            pyc__py_report("text/plain");
    }
    if (text == NULL)
        text = PyObject_Repr(obj);
    if (text == NULL || !PyUnicode_Check(text)) {
        if (text == NULL)
            pyc__py_report("repr()");
        Py_XDECREF(text);
        return PyUnicode_FromString("<object whose repr() failed>");
    }
    return text;
}

/* Adds what _repr_mimebundle_(include=None, exclude=None) returns: a dict of MIME types, or (data,
 * metadata).  Called with keywords, as IPython calls it (ipywidgets 8 and scikit-learn take **kwargs). */
static void
add_bundle(PyObject *data, PyObject *md, PyObject *method)
{
    PyObject *kw = Py_BuildValue("{s:O, s:O}", "include", Py_None, "exclude", Py_None);
    PyObject *noargs = PyTuple_New(0);
    PyObject *bundle = kw != NULL && noargs != NULL ? PyObject_Call(method, noargs, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(noargs);
    if (bundle == NULL) {
        pyc__py_report("_repr_mimebundle_");
        return;
    }
    PyObject *bdata = bundle, *bmeta = NULL;
    if (PyTuple_Check(bundle) && PyTuple_GET_SIZE(bundle) == 2) {
        bdata = PyTuple_GET_ITEM(bundle, 0);
        bmeta = PyTuple_GET_ITEM(bundle, 1);
    }
    if (bdata != Py_None && PyDict_Check(bdata))
        add_mimes(data, bdata, false);
    if (bmeta != NULL && PyDict_Check(bmeta) && PyDict_Update(md, bmeta) < 0)
        PyErr_Clear();
    Py_DECREF(bundle);
}

int
pyc__py_format(PyObject *obj, bool self_display, PyObject **data_out, PyObject **md_out)
{
    *data_out = *md_out = NULL;
    /* Classes have the repr methods as plain functions, and objects that answer every attribute have none
     * that mean anything: only other instances are asked. */
    bool ask = !PyType_Check(obj) && !answers_everything(obj);
    if (ask && self_display) {
        PyObject *m = real_method(obj, "_ipython_display_");
        if (m != NULL) {
            PyObject *r = PyObject_CallNoArgs(m);
            Py_DECREF(m);
            if (r != NULL) {
                Py_DECREF(r);
                return 1;
            }
            pyc__py_report("_ipython_display_");   /* then shown as any object, as IPython does */
        }
    }
    PyObject *data = PyDict_New(), *md = PyDict_New();
    if (data == NULL || md == NULL) {
        Py_XDECREF(data);
        Py_XDECREF(md);
        return -1;
    }
    if (ask) {
        PyObject *m = real_method(obj, "_repr_mimebundle_");
        if (m != NULL) {
            add_bundle(data, md, m);
            Py_DECREF(m);
        }
    }
    if (PyDict_GetItemString(data, "text/plain") == NULL) {
        /* Bytes stand for their repr: the JSON writer writes it straight into the message (json.c), instead
         * of a repr made here and copied there, a 10 MB result's two passes and fresh block fewer. */
        PyObject *plain = PyBytes_CheckExact(obj) ? Py_NewRef(obj) : plain_text(obj);
        if (plain == NULL || PyDict_SetItemString(data, "text/plain", plain) < 0)
            PyErr_Clear();
        Py_XDECREF(plain);
    }
    for (size_t i = 0; ask && i < sizeof repr_methods / sizeof repr_methods[0]; i++) {
        if (PyDict_GetItemString(data, repr_methods[i].mime) != NULL)
            continue;
        PyObject *meth = real_method(obj, repr_methods[i].method);
        if (meth == NULL)
            continue;
        PyObject *res = PyObject_CallNoArgs(meth);
        Py_DECREF(meth);
        if (res == NULL) {
            pyc__py_report(repr_methods[i].method);
            continue;
        }
        add_repr(data, md, repr_methods[i].mime, res);
        Py_DECREF(res);
    }
    *data_out = data;
    *md_out = md;
    return 0;
}

/* Writes dict as a JSON object, member by member: a member whose value cannot be written (a reference cycle)
 * is left out, and reported on stderr when report is true (a bundle's data), as a broken repr method is.
 * strict: such a member ends it with -1 and the Python error set instead.  Returns 0 or -1. */
static int
members_text(pyc_buf_t *b, PyObject *dict, bool report, bool strict)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    bool first = true;
    if (pyc_buf_add(b, "{", 1) < 0)
        return PyErr_NoMemory(), -1;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        size_t before = b->len;
        if ((!first && pyc_buf_add(b, ",", 1) < 0) || pyc__py_json_text(b, key) < 0 ||
            pyc_buf_add(b, ":", 1) < 0 || pyc__py_json_text(b, value) < 0) {
            if (strict)
                return PyErr_Occurred() ? -1 : (PyErr_NoMemory(), -1);
            b->len = before;
            if (report && PyUnicode_Check(key) && PyErr_Occurred())
                pyc__py_report(PyUnicode_AsUTF8(key));
            PyErr_Clear();
            continue;
        }
        first = false;
    }
    return pyc_buf_add(b, "}", 1) < 0 ? (PyErr_NoMemory(), -1) : 0;
}

/* The content of a display_data, update_display_data or execute_result as JSON text in b:
 * {["execution_count":count,]"data":{...},"metadata":{...}[,"transient":{...}]}, count < 0 and transient NULL
 * leaving theirs out.  strict as for members_text, for data.  Returns 0 or -1 with a Python error set. */
static int
bundle_text(pyc_buf_t *b, long count, PyObject *data, PyObject *md, PyObject *transient, bool strict)
{
    if (pyc_buf_add(b, "{", 1) < 0 ||
        (count >= 0 && (pyc_buf_adds(b, "\"execution_count\":") < 0 || pyc_buf_add_int(b, count) < 0 ||
                        pyc_buf_add(b, ",", 1) < 0)) ||
        pyc_buf_adds(b, "\"data\":") < 0)
        return PyErr_NoMemory(), -1;
    if (members_text(b, data, true, strict) < 0 || pyc_buf_adds(b, ",\"metadata\":") < 0 ||
        members_text(b, md, false, false) < 0)
        return PyErr_Occurred() ? -1 : (PyErr_NoMemory(), -1);
    if (transient != NULL && (pyc_buf_adds(b, ",\"transient\":") < 0 || members_text(b, transient, false, false) < 0))
        return PyErr_Occurred() ? -1 : (PyErr_NoMemory(), -1);
    return pyc_buf_add(b, "}", 1) < 0 ? (PyErr_NoMemory(), -1) : 0;
}

/* Publishes a bundle as msg_type (see bundle_text); data's text/plain, when a str, is the cell's event's.
 * Returns 0 or -1 with a Python error set. */
static int
publish_bundle_of(const char *msg_type, long count, PyObject *data, PyObject *md, PyObject *transient, bool strict)
{
    pyc_buf_t b;
    pyc_buf_init(&b, SIZE_MAX / 2);
    if (bundle_text(&b, count, data, md, transient, strict) < 0) {
        pyc_buf_free(&b);
        return -1;
    }
    PyObject *plain = PyDict_GetItemString(data, "text/plain");
    Py_ssize_t plen = 0;
    const char *p = plain != NULL && PyUnicode_Check(plain) ? PyUnicode_AsUTF8AndSize(plain, &plen) : NULL;
    if (p == NULL)
        PyErr_Clear();
    size_t len;
    char *text = pyc_buf_detach(&b, &len);
    pyc__py_host.publish_text(pyc__py_host.ctx, msg_type, text, len, NULL, p, (size_t)plen, NULL, 0);
    return 0;
}

json_t *
pyc__py_format_json(PyObject *obj, json_t **md_out)
{
    PyObject *data, *md;
    *md_out = NULL;
    if (pyc__py_format(obj, false, &data, &md) < 0)
        return NULL;
    json_t *d = pyc__py_to_json(data), *m = d != NULL ? pyc__py_to_json(md) : NULL;
    Py_DECREF(data);
    Py_DECREF(md);
    if (m == NULL) {
        json_decref(d);
        return NULL;
    }
    *md_out = m;
    return d;
}

/* sys.displayhook: publishes execute_result for the value of the cell's last expression, and keeps it as
 * _, _N and Out[N] (pyc._shell). */
static PyObject *
displayhook(PyObject *self, PyObject *obj)
{
    (void)self;
    if (obj == Py_None)
        Py_RETURN_NONE;
    PyObject *data, *md;
    int rc = pyc__py_format(obj, true, &data, &md);
    if (rc < 0)
        return NULL;
    if (rc == 0) {
        rc = publish_bundle_of("execute_result", pyc__py_here()->execution_count, data, md, NULL, false);
        Py_DECREF(data);
        Py_DECREF(md);
        if (rc < 0)
            pyc__py_report("execute_result");
    }
    PyObject *store = pyc__py_support("pyc._shell", "store_result");
    PyObject *r = store != NULL ? PyObject_CallFunction(store, "Oi", obj, pyc__py_here()->execution_count) : NULL;
    if (r == NULL)
        pyc__py_report("keeping the result as Out");
    Py_XDECREF(r);
    Py_RETURN_NONE;
}

/* Publishes a display_data or update_display_data for obj: nothing when obj displayed itself
 * (_ipython_display_).  Returns 0, or -1 with a Python error set. */
static int
display_one(const char *msg_type, PyObject *obj, PyObject *metadata, PyObject *transient, PyObject *display_id,
            int raw)
{
    PyObject *data, *md;
    if (raw && PyDict_Check(obj)) {
        data = PyDict_New();
        md = PyDict_New();
        if (data == NULL || md == NULL || add_mimes(data, obj, true) < 0) {
            Py_XDECREF(data);
            Py_XDECREF(md);
            return -1;
        }
    } else {
        int rc = pyc__py_format(obj, true, &data, &md);
        if (rc != 0)
            return rc < 0 ? -1 : 0;      /* 1: obj displayed itself, nothing more to publish */
    }
    if (metadata != NULL && PyDict_Check(metadata) && PyDict_Update(md, metadata) < 0)
        PyErr_Clear();
    PyObject *tr = transient != NULL && PyDict_Check(transient) ? PyDict_Copy(transient) : PyDict_New();
    if (tr != NULL && display_id != NULL && display_id != Py_None &&
        PyDict_SetItemString(tr, "display_id", display_id) < 0)
        PyErr_Clear();
    int rc = tr != NULL ? publish_bundle_of(msg_type, -1, data, md, tr, raw != 0) : -1;
    Py_XDECREF(tr);
    Py_DECREF(data);
    Py_DECREF(md);
    return rc;
}

static PyObject *
kwarg(PyObject *kwargs, const char *name)
{
    return kwargs != NULL ? PyDict_GetItemString(kwargs, name) : NULL;
}

/* Returns pyc.DisplayHandle(display_id), or the id itself when the package cannot be imported. */
static PyObject *
display_handle(PyObject *display_id)
{
    PyObject *mod = PyImport_ImportModule("pyc");
    PyObject *cls = mod != NULL ? PyObject_GetAttrString(mod, "DisplayHandle") : NULL;
    Py_XDECREF(mod);
    if (cls == NULL) {
        PyErr_Clear();
        Py_INCREF(display_id);
        return display_id;
    }
    PyObject *h = PyObject_CallFunctionObjArgs(cls, display_id, NULL);
    Py_DECREF(cls);
    return h;
}

/* display(*objs, metadata=None, transient=None, display_id=None, raw=False): publishes display_data for
 * each object.  display_id=True asks for a new id; with an id, returns a handle whose update() publishes
 * update_display_data. */
static PyObject *
display(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    PyObject *display_id = kwarg(kwargs, "display_id"), *raw = kwarg(kwargs, "raw");
    PyObject *new_id = NULL, *result = NULL;
    int is_raw = raw != NULL && PyObject_IsTrue(raw) == 1;
    if (display_id == Py_True) {
        char id[PYC_MSG_ID_LEN + 1];
        pyc_msg_new_id(id);
        new_id = PyUnicode_FromString(id);
        if (new_id == NULL)
            return NULL;
        display_id = new_id;
    }
    if (!(pyc__py_here()->silent && pyc__py_here()->running)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
            if (display_one("display_data", PyTuple_GET_ITEM(args, i), kwarg(kwargs, "metadata"),
                            kwarg(kwargs, "transient"), display_id, is_raw) < 0)
                goto out;
        }
    }
    if (display_id != NULL && display_id != Py_None)
        result = display_handle(display_id);
    else
        result = Py_NewRef(Py_None);
out:
    Py_XDECREF(new_id);
    return result;
}

/* update_display(obj, display_id=..., metadata=None, transient=None, raw=False): publishes
 * update_display_data, which replaces every output shown with that display_id. */
static PyObject *
update_display(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    PyObject *display_id = kwarg(kwargs, "display_id"), *raw = kwarg(kwargs, "raw");
    if (PyTuple_GET_SIZE(args) != 1 || display_id == NULL || display_id == Py_None) {
        PyErr_SetString(PyExc_TypeError, "update_display(obj, display_id=ID) takes one object and a display_id");
        return NULL;
    }
    if (pyc__py_here()->silent && pyc__py_here()->running)
        Py_RETURN_NONE;
    if (display_one("update_display_data", PyTuple_GET_ITEM(args, 0), kwarg(kwargs, "metadata"),
                    kwarg(kwargs, "transient"), display_id, raw != NULL && PyObject_IsTrue(raw) == 1) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* _pyc.publish_bundle(msg_type, data, metadata=None, transient=None, execution_count=None): publishes a
 * display_data, update_display_data or execute_result whose MIME bundle another formatter made (IPython's
 * shell), its values converted as the kernel's own (binary types base64). */
static PyObject *
publish_bundle(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kwlist[] = {"msg_type", "data", "metadata", "transient", "execution_count", NULL};
    const char *msg_type;
    PyObject *data, *metadata = Py_None, *transient = Py_None, *count = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sO!|OOO:publish_bundle", kwlist, &msg_type, &PyDict_Type,
                                     &data, &metadata, &transient, &count))
        return NULL;
    long n = -1;
    if (count != Py_None && (n = PyLong_AsLong(count)) == -1 && PyErr_Occurred())
        return NULL;
    PyObject *bundle = PyDict_New(), *md = PyDict_New();
    PyObject *tr = transient != Py_None ? PyDict_New() : NULL;
    int rc = bundle != NULL && md != NULL && (transient == Py_None || tr != NULL) ? add_mimes(bundle, data, true) : -1;
    if (rc == 0 && PyDict_Check(metadata))
        rc = PyDict_Update(md, metadata);
    if (rc == 0 && tr != NULL && PyDict_Check(transient))
        rc = PyDict_Update(tr, transient);
    if (rc == 0)
        rc = publish_bundle_of(msg_type, count != Py_None ? n : -1, bundle, md, tr, true);
    Py_XDECREF(bundle);
    Py_XDECREF(md);
    Py_XDECREF(tr);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* clear_output(wait=False): clears the cell's output now, or when the next output arrives (wait=True). */
static PyObject *
clear_output(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kwlist[] = {"wait", NULL};
    int wait = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:clear_output", kwlist, &wait))
        return NULL;
    pyc__py_host.publish(pyc__py_host.ctx, "clear_output", json_pack("{s:b}", "wait", wait));
    Py_RETURN_NONE;
}

PyMethodDef pyc__py_display_methods[] = {
    {"displayhook", (PyCFunction)displayhook, METH_O, "Publish the value of a cell's last expression."},
    {"display", (PyCFunction)(void (*)(void))display, METH_VARARGS | METH_KEYWORDS,
     "display(*objs, metadata=None, transient=None, display_id=None, raw=False): publish rich output."},
    {"update_display", (PyCFunction)(void (*)(void))update_display, METH_VARARGS | METH_KEYWORDS,
     "update_display(obj, display_id=ID, metadata=None, raw=False): replace an earlier display."},
    {"clear_output", (PyCFunction)(void (*)(void))clear_output, METH_VARARGS | METH_KEYWORDS,
     "clear_output(wait=False): clear the output of the cell."},
    {"publish_bundle", (PyCFunction)(void (*)(void))publish_bundle, METH_VARARGS | METH_KEYWORDS,
     "publish_bundle(msg_type, data, metadata=None, transient=None, execution_count=None): publish a bundle."},
    {"publish", (PyCFunction)(void (*)(void))py_publish, METH_VARARGS | METH_KEYWORDS,
     "publish(msg_type, content, metadata=None, buffers=None): publish an iopub message."},
    {NULL, NULL, 0, NULL},
};
