/*
 * error.c -- a Python exception as the content of a Jupyter error: {"ename", "evalue", "traceback"}.
 *
 * The traceback starts at the first frame of a cell (the kernel's own frames above it, and asyncio's when a
 * cell awaits, are dropped), and is laid out and colored as IPython lays it out in a notebook by
 * pyc._traceback, which names a cell's frames "Cell In [N]" from the execution count that run_cell noted for
 * the cell's file name (pyc__py_note_cell).  If that layout fails, Python's own traceback module's stands in.
 * Also pyc__py_report: a failed call of the kernel's own Python work, told on the cell's stdout.
 */
#include "pyint.h"

#include <stdio.h>
#include <string.h>

/* The execution count of each cell's file name (cellfile.h), for "Cell In [N]" in tracebacks. */
static PyObject *cell_counts;

/* Whether a traceback entry runs in a cell's code: its file name is one that run_cell noted. */
static int
is_cell_frame(PyObject *tb)
{
    PyFrameObject *f = ((PyTracebackObject *)tb)->tb_frame;
    PyCodeObject *code = PyFrame_GetCode(f);
    int r = cell_counts != NULL ? PyDict_Contains(cell_counts, code->co_filename) : 0;
    Py_DECREF(code);
    if (r < 0) {
        PyErr_Clear();
        r = 0;
    }
    return r;
}

/* Appends the strings of a list to a JSON array, each without its final newline when strip is true. */
static void
append_lines(json_t *arr, PyObject *list, bool strip)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(list, i), &n);
        if (s == NULL) {
            PyErr_Clear();
            continue;
        }
        if (strip && n > 0 && s[n - 1] == '\n')
            n--;
        json_array_append_new(arr, json_stringn(s, (size_t)n));
    }
}

void
pyc__py_note_cell(PyObject *filename, int execution_count)
{
    PyObject *count = PyLong_FromLong(execution_count);
    if (count == NULL || (cell_counts == NULL && (cell_counts = PyDict_New()) == NULL) ||
        PyDict_SetItem(cell_counts, filename, count) < 0)
        PyErr_Clear();
    Py_XDECREF(count);
}

bool
pyc__py_cell_noted(PyObject *filename)
{
    int r = cell_counts != NULL ? PyDict_Contains(cell_counts, filename) : 0;
    if (r < 0)
        PyErr_Clear();
    return r == 1;
}

void
pyc__py_forget_cell(PyObject *filename)
{
    if (cell_counts != NULL && PyDict_DelItem(cell_counts, filename) < 0)
        PyErr_Clear();
}

/* The traceback entries of an error: pyc._traceback's IPython-style layout (entries as they are sent), or
 * the traceback module's when that fails (*strip is then true: its lines end with a newline that the entries
 * must not have).  Returns a new list or NULL with a Python error set. */
static PyObject *
format_traceback(PyObject *type, PyObject *value, PyObject *tb, bool *strip)
{
    *strip = false;
    PyObject *format = pyc__py_support("pyc._traceback", "format");
    if (cell_counts == NULL && (cell_counts = PyDict_New()) == NULL)
        return NULL;
    PyObject *lines = format != NULL ? PyObject_CallFunction(format, "OOOOO", type, value, tb, cell_counts,
                                                             pyc__py_here()->plain ? Py_False : Py_True)
                                     : NULL;
    if (lines != NULL && PyList_Check(lines))
        return lines;
    Py_XDECREF(lines);
    pyc__py_report("formatting the traceback");
    *strip = true;
    PyObject *tbmod = PyImport_ImportModule("traceback");
    lines = tbmod != NULL ? PyObject_CallMethod(tbmod, "format_exception", "OOO", type, value, tb) : NULL;
    Py_XDECREF(tbmod);
    return lines;
}

json_t *
pyc__py_error_content(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);

    /* Drop the frames above the user's code. */
    PyObject *cut = tb;
    while (cut != NULL && cut != Py_None && !is_cell_frame(cut))
        cut = (PyObject *)((PyTracebackObject *)cut)->tb_next;
    if (cut == NULL && tb != NULL)
        cut = Py_None;           /* no cell frame: the error came from the kernel's own call, show none */
    if (value != NULL)
        PyException_SetTraceback(value, cut != NULL ? cut : Py_None);

    const char *ename = type != NULL ? ((PyTypeObject *)type)->tp_name : "Exception";
    const char *dot = strrchr(ename, '.');
    if (dot != NULL)
        ename = dot + 1;
    PyObject *vs = value != NULL ? PyObject_Str(value) : NULL;
    if (vs == NULL)
        PyErr_Clear();
    const char *evalue = vs != NULL ? PyUnicode_AsUTF8(vs) : "";
    if (evalue == NULL) {
        PyErr_Clear();
        evalue = "";
    }
    json_t *trace = json_array();
    bool strip = false;
    PyObject *lines = type != NULL ? format_traceback(type, value ? value : Py_None, cut ? cut : Py_None, &strip)
                                   : NULL;
    if (lines != NULL && PyList_Check(lines)) {
        append_lines(trace, lines, strip);
    } else {
        PyErr_Clear();
        json_array_append_new(trace, json_sprintf("%s: %s", ename, evalue));
    }
    json_t *content = json_pack("{s:s, s:s, s:o}", "ename", ename, "evalue", evalue, "traceback", trace);
    Py_XDECREF(lines);
    Py_XDECREF(vs);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return content;
}

void
pyc__py_report(const char *what)
{
    json_t *e = pyc__py_error_content();
    char line[512];
    int n = snprintf(line, sizeof line, "pyc: %s failed: %s: %s\n", what,
                     json_string_value(json_object_get(e, "ename")), json_string_value(json_object_get(e, "evalue")));
    json_decref(e);
    if (n > 0)
        pyc__py_host.stream_write(pyc__py_host.ctx, 1, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

PyObject *
pyc__py_call_support(const char *module, const char *name, const char *what)
{
    PyObject *f = pyc__py_support(module, name);
    PyObject *r = f != NULL ? PyObject_CallNoArgs(f) : NULL;
    if (r == NULL)
        pyc__py_report(what);
    return r;
}
