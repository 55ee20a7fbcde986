/*
 * json.c -- Python values to JSON and back, for message contents: display data, comm messages, replies.
 *
 * Python to JSON takes dicts (keys by str()), lists and tuples, str, int (beyond 64 bits as a float), float,
 * bool and None, and anything else by str(); a reference cycle or nesting deeper than MAX_JSON_DEPTH is a
 * ValueError, never a crash.  JSON to Python gives dicts, lists, str (invalid UTF-8 replaced), int, float,
 * bool and None.
 */
#include "pyint.h"

/* The deepest nesting of display data converted to JSON.  IPython's JSON formatter has no limit of its own
 * and Python's json module stops at the interpreter's recursion limit (1000); 256 keeps the C stack of the
 * conversion small (a few kB per level) on any thread. */
#define MAX_JSON_DEPTH 256

/* Converts obj, whose containers on the way down from the top are path[0..depth): a container that is
 * already on the path is a reference cycle, which JSON cannot express. */
static json_t *
to_json_at(PyObject *obj, PyObject **path, int depth)
{
    if (obj == Py_None)
        return json_null();
    if (PyBool_Check(obj))
        return json_boolean(obj == Py_True);
    if (PyLong_Check(obj)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (!overflow && !(v == -1 && PyErr_Occurred()))
            return json_integer(v);
        PyErr_Clear();
        return json_real(PyLong_AsDouble(obj));
    }
    if (PyFloat_Check(obj))
        return json_real(PyFloat_AS_DOUBLE(obj));
    if (PyUnicode_Check(obj)) {
        Py_ssize_t n;
        const char *p = PyUnicode_AsUTF8AndSize(obj, &n);
        if (p == NULL) {
            PyErr_Clear();
            return json_string("<text that is not valid Unicode>");
        }
        json_t *s = json_stringn(p, (size_t)n);
        return s != NULL ? s : json_string("");
    }
    if (PyDict_Check(obj) || PyList_Check(obj) || PyTuple_Check(obj)) {
        for (int i = 0; i < depth; i++) {
            if (path[i] == obj) {
                PyErr_SetString(PyExc_ValueError, "display data holds a reference cycle (a container that "
                                                  "contains itself), which JSON cannot express");
                return NULL;
            }
        }
        if (depth == MAX_JSON_DEPTH) {
            PyErr_Format(PyExc_ValueError, "display data is nested more than %d levels deep", MAX_JSON_DEPTH);
            return NULL;
        }
        path[depth] = obj;
    }
    if (PyDict_Check(obj)) {
        json_t *o = json_object();
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(obj, &pos, &key, &value)) {
            PyObject *ks = PyObject_Str(key);
            if (ks == NULL) {
                json_decref(o);
                return NULL;
            }
            json_t *v = to_json_at(value, path, depth + 1);
            const char *kp = PyUnicode_AsUTF8(ks);
            if (v == NULL || kp == NULL) {
                Py_DECREF(ks);
                json_decref(v);
                json_decref(o);
                return NULL;
            }
            json_object_set_new(o, kp, v);
            Py_DECREF(ks);
        }
        return o;
    }
    if (PyList_Check(obj) || PyTuple_Check(obj)) {
        json_t *a = json_array();
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        for (Py_ssize_t i = 0; i < n; i++) {
            json_t *v = to_json_at(PySequence_Fast_GET_ITEM(obj, i), path, depth + 1);
            if (v == NULL) {
                json_decref(a);
                return NULL;
            }
            json_array_append_new(a, v);
        }
        return a;
    }
    PyObject *s = PyObject_Str(obj);
    if (s == NULL)
        return NULL;
    json_t *r = to_json_at(s, path, depth);
    Py_DECREF(s);
    return r;
}

json_t *
pyc__py_to_json(PyObject *obj)
{
    PyObject *path[MAX_JSON_DEPTH];
    return to_json_at(obj, path, 0);
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
