/*
 * json.c -- Python values to JSON and back, for message contents: display data, comm messages, replies.
 *
 * Python to JSON takes dicts (keys by str()), lists and tuples, str, int (beyond 64 bits as a float), float
 * (as its repr, as Python's json module writes it; NaN and the infinities as null, as JSON.stringify writes
 * them), bool and None, and anything else by str();
 * a reference cycle or nesting deeper than MAX_JSON_DEPTH is a ValueError, never a crash.  It is written as
 * text, straight into the buffer a message is sent from (a 10 MB repr is copied once, escaped on the way);
 * a jansson tree, where one is wanted, is read back from that text, so that both follow the same rules.
 * JSON to Python gives dicts, lists, str (invalid UTF-8 replaced), int, float, bool and None.
 */
#include "pyint.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "jsontext.h"

/* The deepest nesting of display data converted to JSON.  IPython's JSON formatter has no limit of its own
 * and Python's json module stops at the interpreter's recursion limit (1000); 256 keeps the C stack of the
 * conversion small (a few kB per level) on any thread. */
#define MAX_JSON_DEPTH 256

/* Writes obj as JSON text to b; its containers on the way down from the top are path[0..depth): a container
 * that is already on the path is a reference cycle, which JSON cannot express.  Returns 0, or -1 with a
 * Python error set (b then holds part of the text: the caller cuts it back). */
/* A float as Python's json.dumps writes it, and so ipykernel: its repr, the shortest text that reads back the
 * same (0.1, 1e+300, -0.0), whatever jansson version the kernel runs with.  NaN and the infinities have no
 * JSON form: null, as JSON.stringify writes them.  Returns 0 or -1 (memory). */
static int
real_text(pyc_buf_t *b, double v)
{
    if (!isfinite(v))
        return pyc_buf_add(b, "null", 4);
    char *s = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (s == NULL) {
        PyErr_Clear();
        return -1;
    }
    int rc = pyc_buf_adds(b, s);
    PyMem_Free(s);
    return rc;
}

/* True for each of the eight bytes of v that repr(bytes) or JSON writes as more than itself: below 0x20, 0x7f
 * and above, a quote of either kind, a backslash (the high bit of each such byte set, the others clear). */
static uint64_t
repr_special(uint64_t v)
{
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t sq = v ^ (ones * '\''), dq = v ^ (ones * '"'), bs = v ^ (ones * '\\'), del = v ^ (ones * 0x7f);
    uint64_t eq = ((sq - ones) & ~sq) | ((dq - ones) & ~dq) | ((bs - ones) & ~bs) | ((del - ones) & ~del);
    return (((v - ones * 0x20) & ~v) | eq | v) & high;
}

/* Writes repr(bytes) of p[0..n) as a JSON string, in one pass and without making the repr: a 10 MB result is
 * written once, where the repr and then its escaped copy took two fresh 10 MB blocks.  The text is CPython's
 * (bytes_repr): b'...', or b"..." when the bytes hold a ' and no "; \\, the quote, \t, \n and \r escaped,
 * other bytes below 0x20 or from 0x7f on as \xhh.  Returns 0, or -1 out of memory. */
static int
bytes_repr_text(pyc_buf_t *b, const unsigned char *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    char q = memchr(p, '\'', n) != NULL && memchr(p, '"', n) == NULL ? '"' : '\'';
    if (pyc_buf_reserve(b, n + 8) < 0 || pyc_buf_adds(b, q == '"' ? "\"b\\\"" : "\"b'") < 0)
        return -1;
    size_t i = 0, run = 0;
    while (i < n) {
        while (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, p + i, 8);
            if (repr_special(v) != 0)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        unsigned char c = p[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"' && c != '\'') {
            i++;
            continue;
        }
        if (pyc_buf_add(b, p + run, i - run) < 0)
            return -1;
        char esc[8];
        size_t len;
        if (c == '\\')
            len = 4, memcpy(esc, "\\\\\\\\", 4);                /* repr \\, in JSON \\\\ */
        else if (c == (unsigned char)q)
            len = q == '"' ? 4 : 3, memcpy(esc, q == '"' ? "\\\\\\\"" : "\\\\'", len);  /* repr \" or \' */
        else if (c == '"')
            len = 2, memcpy(esc, "\\\"", 2);                     /* repr ", in JSON \" */
        else if (c == '\'')
            len = 1, esc[0] = '\'';                             /* repr ' inside b"..." */
        else if (c == '\t' || c == '\n' || c == '\r')
            len = 3, memcpy(esc, c == '\t' ? "\\\\t" : c == '\n' ? "\\\\n" : "\\\\r", 3);
        else
            len = 5, esc[0] = '\\', esc[1] = '\\', esc[2] = 'x', esc[3] = hex[c >> 4], esc[4] = hex[c & 15];
        if (pyc_buf_add(b, esc, len) < 0)
            return -1;
        run = ++i;
    }
    if (pyc_buf_add(b, p + run, n - run) < 0)
        return -1;
    return pyc_buf_adds(b, q == '"' ? "\\\"\"" : "'\"");
}

static int
text_at(pyc_buf_t *b, PyObject *obj, PyObject **path, int depth)
{
    if (obj == Py_None)
        return pyc_buf_add(b, "null", 4) < 0 ? (PyErr_NoMemory(), -1) : 0;
    if (PyBool_Check(obj))
        return pyc_buf_adds(b, obj == Py_True ? "true" : "false") < 0 ? (PyErr_NoMemory(), -1) : 0;
    int rc = 0;
    if (PyLong_Check(obj)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (!overflow && !(v == -1 && PyErr_Occurred())) {
            rc = pyc_buf_add_int(b, v);
        } else {
            PyErr_Clear();
            double d = PyLong_AsDouble(obj);      /* beyond 64 bits: as a float (inf past a double's range) */
            PyErr_Clear();
            rc = real_text(b, d);
        }
        return rc < 0 ? (PyErr_NoMemory(), -1) : 0;
    }
    if (PyFloat_Check(obj)) {
        rc = real_text(b, PyFloat_AS_DOUBLE(obj));
        return rc < 0 ? (PyErr_NoMemory(), -1) : 0;
    }
    if (PyUnicode_Check(obj)) {
        Py_ssize_t n;
        const char *p = PyUnicode_AsUTF8AndSize(obj, &n);
        if (p == NULL) {
            PyErr_Clear();
            p = "<text that is not valid Unicode>";
            n = (Py_ssize_t)strlen(p);
        }
        return pyc_buf_add_json_string(b, p, (size_t)n) < 0 ? (PyErr_NoMemory(), -1) : 0;
    }
    if (PyBytes_CheckExact(obj))                /* str() of bytes is their repr */
        return bytes_repr_text(b, (const unsigned char *)PyBytes_AS_STRING(obj), (size_t)PyBytes_GET_SIZE(obj)) < 0
                   ? (PyErr_NoMemory(), -1)
                   : 0;
    bool dict = PyDict_Check(obj);
    if (dict || PyList_Check(obj) || PyTuple_Check(obj)) {
        for (int i = 0; i < depth; i++) {
            if (path[i] == obj) {
                PyErr_SetString(PyExc_ValueError, "display data holds a reference cycle (a container that "
                                                  "contains itself), which JSON cannot express");
                return -1;
            }
        }
        if (depth == MAX_JSON_DEPTH) {
            PyErr_Format(PyExc_ValueError, "display data is nested more than %d levels deep", MAX_JSON_DEPTH);
            return -1;
        }
        path[depth] = obj;
    }
    if (dict) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        bool first = true;
        if (pyc_buf_add(b, "{", 1) < 0)
            return PyErr_NoMemory(), -1;
        while (PyDict_Next(obj, &pos, &key, &value)) {
            PyObject *ks = PyUnicode_Check(key) ? Py_NewRef(key) : PyObject_Str(key);
            if (ks == NULL)
                return -1;
            rc = (!first && pyc_buf_add(b, ",", 1) < 0) ? (PyErr_NoMemory(), -1) : text_at(b, ks, path, depth + 1);
            Py_DECREF(ks);
            if (rc < 0 || pyc_buf_add(b, ":", 1) < 0 || text_at(b, value, path, depth + 1) < 0)
                return PyErr_Occurred() ? -1 : (PyErr_NoMemory(), -1);
            first = false;
        }
        return pyc_buf_add(b, "}", 1) < 0 ? (PyErr_NoMemory(), -1) : 0;
    }
    if (PyList_Check(obj) || PyTuple_Check(obj)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        if (pyc_buf_add(b, "[", 1) < 0)
            return PyErr_NoMemory(), -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            if ((i > 0 && pyc_buf_add(b, ",", 1) < 0) || text_at(b, PySequence_Fast_GET_ITEM(obj, i), path,
                                                                   depth + 1) < 0)
                return PyErr_Occurred() ? -1 : (PyErr_NoMemory(), -1);
        }
        return pyc_buf_add(b, "]", 1) < 0 ? (PyErr_NoMemory(), -1) : 0;
    }
    PyObject *s = PyObject_Str(obj);
    if (s == NULL)
        return -1;
    rc = text_at(b, s, path, depth);
    Py_DECREF(s);
    return rc;
}

int
pyc__py_json_text(pyc_buf_t *b, PyObject *obj)
{
    PyObject *path[MAX_JSON_DEPTH];
    size_t start = b->len;
    if (text_at(b, obj, path, 0) == 0)
        return 0;
    b->len = start;
    if (b->data != NULL)
        b->data[start] = '\0';
    return -1;
}

json_t *
pyc__py_to_json(PyObject *obj)
{
    pyc_buf_t b;
    pyc_buf_init(&b, SIZE_MAX / 2);
    if (pyc__py_json_text(&b, obj) < 0) {
        pyc_buf_free(&b);
        return NULL;
    }
    json_error_t e;
    json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    pyc_buf_free(&b);
    if (j == NULL)
        PyErr_Format(PyExc_ValueError, "cannot read back the JSON of a value: %s", e.text);
    return j;
}

PyObject *
pyc__py_from_json(json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        PyObject *d = PyDict_New();
        const char *key;
        json_t *value;
        if (d == NULL)
            return NULL;
        json_object_foreach(j, key, value) {
            PyObject *v = pyc__py_from_json(value);
            if (v == NULL || PyDict_SetItemString(d, key, v) < 0) {
                Py_XDECREF(v);
                Py_DECREF(d);
                return NULL;
            }
            Py_DECREF(v);
        }
        return d;
    }
    case JSON_ARRAY: {
        PyObject *l = PyList_New((Py_ssize_t)json_array_size(j));
        if (l == NULL)
            return NULL;
        for (size_t i = 0; i < json_array_size(j); i++) {
            PyObject *v = pyc__py_from_json(json_array_get(j, i));
            if (v == NULL) {
                Py_DECREF(l);
                return NULL;
            }
            PyList_SET_ITEM(l, (Py_ssize_t)i, v);
        }
        return l;
    }
    case JSON_STRING:
        return PyUnicode_DecodeUTF8(json_string_value(j), (Py_ssize_t)json_string_length(j), "replace");
    case JSON_INTEGER:
        return PyLong_FromLongLong(json_integer_value(j));
    case JSON_REAL:
        return PyFloat_FromDouble(json_real_value(j));
    case JSON_TRUE:
        Py_RETURN_TRUE;
    case JSON_FALSE:
        Py_RETURN_FALSE;
    default:
        Py_RETURN_NONE;
    }
}
