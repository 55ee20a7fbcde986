/*
 * cell.c -- compiling and running a cell's code, and its source in linecache.
 *
 * A cell whose last statement may be an expression is parsed into an AST (with top-level await allowed).
 * When its last statement is an expression, that statement is split off and compiled in "single" mode, so
 * that CPython itself calls sys.displayhook with its value, exactly as at the >>> prompt; the rest runs in
 * "exec" mode.  A last line ending in ';' suppresses the result, as in IPython.  A cell whose last statement
 * cannot be an expression (lastline.h: an assignment, a keyword statement, a block), or whose result is not
 * shown (silent, the ';'), is compiled from its source in one step instead (the fast path): `x = 1` costs
 * 7 µs less than through the AST round trip.  When that compile fails, the AST path runs and reports the
 * error as it always did.  A cell with a __future__ import after other statements, which Python refuses,
 * is compiled statement by statement as IPython compiles every cell (the line numbers are the cell's), and
 * the __future__ features cells import hold for the cells after them, as in IPython.  When a part awaits
 * (top-level await), the whole cell runs as one coroutine on the kernel's asyncio loop (async.c,
 * pyc._asyncio).
 *
 * The cell's source is registered in linecache under its file name, so that tracebacks and inspect show the
 * user's lines: linecache's lazy kind of entry, a 1-tuple holding a function that returns the text, turned
 * into lines only when something reads them.  After the cell, exec.c drops it again, with the execution
 * count error.c noted for the name, when nothing can ask for those lines any more: the cell succeeded, its
 * code holds no code objects (no function, class, lambda, comprehension or generator whose frames could run
 * later), the name was not known before it (the same text ran earlier), and no debug session is on.  So a
 * notebook of `x = i` cells does not grow linecache by 600 bytes a cell, while a function defined in an
 * earlier cell still shows its lines in a traceback and to inspect.getsource, and a cell that catches and
 * prints its own traceback (traceback.print_exc) shows its lines, the entry being there while it runs.
 */
#include "pyint.h"

#include <string.h>

#include "lastline.h"

/* The objects every cell used to look up (2 imports and 4 getattrs a cell), looked up on first use with the
 * GIL and kept: each is a reference held here for the life of the process.  linecache.cache is kept as the
 * dict object: linecache itself only ever clears it, and a cell that binds linecache.cache to another dict
 * would lose the earlier cells' lines in any case. */
static struct {
    PyObject *line_cache;        /* linecache.cache */
    PyObject *str_name;          /* "__str__", for the lazy entry's function */
    PyObject *ast_expr;          /* _ast.Expr */
    PyObject *ast_interactive;   /* _ast.Interactive */
    PyObject *ast_module;        /* _ast.Module */
    PyObject *compile;           /* builtins.compile */
} cached;

/* linecache.cache, imported on the first cell; NULL with a Python error set when it cannot be. */
static PyObject *
line_cache(void)
{
    if (cached.line_cache == NULL) {
        PyObject *linecache = PyImport_ImportModule("linecache");
        PyObject *cache = linecache != NULL ? PyObject_GetAttrString(linecache, "cache") : NULL;
        Py_XDECREF(linecache);
        if (cache != NULL && !PyDict_Check(cache)) {
            Py_DECREF(cache);
            PyErr_SetString(PyExc_TypeError, "linecache.cache is not a dict");
            return NULL;
        }
        cached.line_cache = cache;
    }
    return cached.line_cache;
}

/* _ast.Expr, _ast.Interactive and _ast.Module, and builtins.compile, for the AST path; -1 with a Python error
 * set when one is missing. */
static int
ast_objects(void)
{
    if (cached.compile != NULL)
        return 0;
    PyObject *ast = PyImport_ImportModule("_ast");
    PyObject *expr = ast != NULL ? PyObject_GetAttrString(ast, "Expr") : NULL;
    PyObject *inter = expr != NULL ? PyObject_GetAttrString(ast, "Interactive") : NULL;
    PyObject *module = inter != NULL ? PyObject_GetAttrString(ast, "Module") : NULL;
    Py_XDECREF(ast);
    PyObject *compile = PyDict_GetItemString(PyEval_GetBuiltins(), "compile");
    if (module == NULL || compile == NULL) {
        Py_XDECREF(expr);
        Py_XDECREF(inter);
        Py_XDECREF(module);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "builtins.compile is missing");
        return -1;
    }
    cached.ast_expr = expr;
    cached.ast_interactive = inter;
    cached.ast_module = module;
    Py_INCREF(compile);
    cached.compile = compile;
    return 0;
}

bool
pyc__py_cell_source_known(PyObject *filename)
{
    PyObject *cache = line_cache();
    int r = cache != NULL ? PyDict_Contains(cache, filename) : 1;
    PyErr_Clear();
    return r != 0 || pyc__py_cell_noted(filename);
}

/* Registers the cell's source with linecache so tracebacks and inspect can show it.  Under a name of the
 * form "<...>" (a fallback cell name), which linecache never loads lazily, the lines are put in whole. */
static void
register_source(PyObject *filename, const char *code)
{
    PyObject *cache = line_cache();
    PyObject *text = cache != NULL ? PyUnicode_FromString(code) : NULL;
    PyObject *entry = NULL;
    if (text != NULL && PyUnicode_READ_CHAR(filename, 0) == '<') {
        PyObject *lines = PyUnicode_Splitlines(text, 1);
        entry = lines != NULL ? Py_BuildValue("(nOOO)", (Py_ssize_t)strlen(code), Py_None, lines, filename) : NULL;
        Py_XDECREF(lines);
    } else if (text != NULL) {
        if (cached.str_name == NULL)
            cached.str_name = PyUnicode_InternFromString("__str__");
        /* str.__str__ bound to the text returns the text itself: linecache calls it for the lines. */
        PyObject *get = cached.str_name != NULL ? PyObject_GetAttr(text, cached.str_name) : NULL;
        entry = get != NULL ? PyTuple_Pack(1, get) : NULL;
        Py_XDECREF(get);
    }
    if (entry == NULL || PyDict_SetItem(cache, filename, entry) < 0)
        PyErr_Clear();
    Py_XDECREF(entry);
    Py_XDECREF(text);
}

void
pyc__py_cell_forget_source(PyObject *filename)
{
    PyObject *cache = line_cache();
    if (cache == NULL || PyDict_DelItem(cache, filename) < 0)
        PyErr_Clear();
    pyc__py_forget_cell(filename);
}

/* True when a compiled cell holds code objects among its constants (the functions, classes, lambdas,
 * comprehensions and generators it defines, each of which holds its own): their frames may run after the
 * cell, in a traceback, the debugger or inspect, and need its lines. */
static bool
defines_code(PyObject *code)
{
    PyObject *consts = ((PyCodeObject *)code)->co_consts;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(consts); i++) {
        if (PyCode_Check(PyTuple_GET_ITEM(consts, i)))
            return true;
    }
    return false;
}

/* The __future__ features that cells have imported (CO_FUTURE_* bits, PyCF_MASK).  Every later cell is
 * compiled with them, as IPython's compiler keeps them: `from __future__ import annotations` in one cell
 * holds for the functions of the cells after it.  A forked session inherits them with the rest. */
static int future_flags;

/* Adds the features that compiled code imported to future_flags. */
static void
note_future(PyObject *code)
{
    future_flags |= ((PyCodeObject *)code)->co_flags & PyCF_MASK;
}

/* Compiles an AST node in mode (top-level await allowed, the cells' __future__ features in force); a new
 * code object or NULL with a Python error. */
static PyObject *
compile_node(PyObject *node, PyObject *filename, const char *mode)
{
    PyObject *code = PyObject_CallFunction(cached.compile, "OOsii", node, filename, mode,
                                           PyCF_ALLOW_TOP_LEVEL_AWAIT | future_flags, 1);
    if (code != NULL)
        note_future(code);
    return code;
}

/* True when the pending error is the compiler's refusal of a __future__ import after other statements. */
static bool
late_future_import(void)
{
    if (!PyErr_ExceptionMatches(PyExc_SyntaxError))
        return false;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *msg = value != NULL ? PyObject_GetAttrString(value, "msg") : NULL;
    const char *text = msg != NULL && PyUnicode_Check(msg) ? PyUnicode_AsUTF8(msg) : NULL;
    bool late = text != NULL && strstr(text, "from __future__ imports must occur") != NULL;
    Py_XDECREF(msg);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    return late;
}

/* Compiles each statement of body as a module of its own, in order, into codes, as IPython compiles a cell:
 * so a __future__ import that follows other statements is accepted, and holds for the statements after it.
 * 0, or -1 with a Python error set. */
static int
compile_statements(PyObject *body, PyObject *filename, PyObject *codes, bool *lasting)
{
    PyObject *noargs = PyTuple_New(0);
    if (noargs == NULL)
        return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(body); i++) {
        PyObject *kw = Py_BuildValue("{s:[O], s:[]}", "body", PyList_GET_ITEM(body, i), "type_ignores");
        PyObject *mod = kw != NULL ? PyObject_Call(cached.ast_module, noargs, kw) : NULL;
        PyObject *code = mod != NULL ? compile_node(mod, filename, "exec") : NULL;
        rc = code != NULL ? PyList_Append(codes, code) : -1;
        if (code != NULL && defines_code(code))
            *lasting = true;
        Py_XDECREF(code);
        Py_XDECREF(mod);
        Py_XDECREF(kw);
    }
    Py_DECREF(noargs);
    return rc;
}

/* Runs the cell's code objects in order.  When one of them awaits, all of them run as one coroutine on the
 * kernel's asyncio loop (async.c), so that what the first part starts (a task) is there for the await. */
static int
run_codes(PyObject *codes, PyObject *globals)
{
    pyc__py_interrupt_reassert();
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(codes); i++) {
        if (((PyCodeObject *)PyList_GET_ITEM(codes, i))->co_flags & CO_COROUTINE)
            return pyc__py_run_async(codes, globals);
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(codes); i++) {
        PyObject *r = PyEval_EvalCode(PyList_GET_ITEM(codes, i), globals, globals);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* The lastline.h scan's flags for this Python's f-strings. */
#if PY_VERSION_HEX >= 0x030C0000
#define SCAN_FLAGS PYC_LASTLINE_NESTED_FSTRINGS
#else
#define SCAN_FLAGS 0u
#endif

/* True when the cell's last token is a ';' (IPython's sign that its result is not shown), comments and
 * blank lines aside, as IPython's displayhook decides from the cell's tokens (scanned: the lastline.h
 * answer for the cell).  A text the scan does not understand even without nested f-strings (it does not
 * compile) is judged by its last line: a ';' at its end with no '#' on that line. */
static bool
ends_with_semicolon(const char *code, int scanned)
{
    if (scanned >= 0)
        return scanned == 1;
    size_t n = strlen(code);
    /* From 3.12 the scan declines any text with an f-string; read as up to 3.11 (an f-string is one string),
     * it misjudges only an f-string whose replacement fields nest its own quotes around a ';' or '#'. */
    int plain = SCAN_FLAGS != 0 ? pyc_lastline_semicolon(code, n, 0) : -1;
    if (plain >= 0)
        return plain == 1;
    while (n > 0 && (code[n - 1] == ' ' || code[n - 1] == '\t' || code[n - 1] == '\n' || code[n - 1] == '\r'))
        n--;
    if (n == 0 || code[n - 1] != ';')
        return false;
    size_t start = n;
    while (start > 0 && code[start - 1] != '\n')
        start--;
    return memchr(code + start, '#', n - start) == NULL;
}

/* The fast path: compiles code from its source in one step and runs it, when no result can be shown (its
 * last statement cannot be an expression, or its result is not to be shown).  Returns what run_cell
 * returns, or 1 when it did not apply or the source did not compile (no Python error set: the AST path
 * then runs, and reports). */
static int
run_source(const char *code, bool no_result, PyObject *filename, PyObject *globals, bool *lasting)
{
    if (!no_result)
        return 1;
    PyCompilerFlags flags = {PyCF_ALLOW_TOP_LEVEL_AWAIT | future_flags, PY_MINOR_VERSION};
    PyObject *compiled = Py_CompileStringObject(code, filename, Py_file_input, &flags, -1);
    if (compiled == NULL) {
        PyErr_Clear();
        return 1;
    }
    note_future(compiled);
    *lasting = defines_code(compiled);
    PyObject *codes = PyList_New(1);
    if (codes == NULL) {
        Py_DECREF(compiled);
        return -1;
    }
    PyList_SET_ITEM(codes, 0, compiled);
    int rc = run_codes(codes, globals);
    Py_DECREF(codes);
    return rc;
}

int
pyc__py_run_cell(const char *code, PyObject *filename, PyObject *globals, bool silent, bool *lasting)
{
    register_source(filename, code);
    pyc__py_note_cell(filename, pyc__py_here()->execution_count);
    pyc_lastline_t scan;
    pyc_lastline_judge(code, strlen(code), SCAN_FLAGS, &scan);
    bool hidden = silent || ends_with_semicolon(code, scan.semicolon);
    int rc = run_source(code, hidden || scan.not_expression, filename, globals, lasting);
    if (rc != 1)
        return rc;

    PyCompilerFlags flags = {PyCF_ONLY_AST | PyCF_ALLOW_TOP_LEVEL_AWAIT | future_flags, PY_MINOR_VERSION};
    PyObject *mod = Py_CompileStringObject(code, filename, Py_file_input, &flags, -1);
    PyObject *body = NULL, *last = NULL, *interactive = NULL;
    rc = -1;
    if (mod == NULL) {
        rc = -2;                 /* nothing ran: the caller may try the IPython-style transforms */
        goto out;
    }
    if (ast_objects() < 0)
        goto out;
    body = PyObject_GetAttrString(mod, "body");
    if (body == NULL || !PyList_Check(body))
        goto out;
    Py_ssize_t n = PyList_GET_SIZE(body);
    if (n > 0 && !hidden) {
        int is_expr = PyObject_IsInstance(PyList_GET_ITEM(body, n - 1), cached.ast_expr);
        if (is_expr < 0)
            goto out;
        if (is_expr == 1) {
            last = PyList_GET_ITEM(body, n - 1);
            Py_INCREF(last);
            if (PyList_SetSlice(body, n - 1, n, NULL) < 0)
                goto out;
            PyObject *one = PyList_New(1);
            if (one == NULL)
                goto out;
            Py_INCREF(last);
            PyList_SET_ITEM(one, 0, last);
            PyObject *kw = Py_BuildValue("{s:O}", "body", one);
            PyObject *noargs = PyTuple_New(0);
            interactive = kw != NULL && noargs != NULL ? PyObject_Call(cached.ast_interactive, noargs, kw) : NULL;
            Py_XDECREF(noargs);
            Py_XDECREF(kw);
            Py_DECREF(one);
            if (interactive == NULL)
                goto out;
        }
    }
    PyObject *codes = PyList_New(0);
    PyObject *compiled = codes != NULL ? compile_node(mod, filename, "exec") : NULL;
    int added = compiled != NULL ? PyList_Append(codes, compiled) : -1;
    if (compiled != NULL && defines_code(compiled))
        *lasting = true;
    Py_XDECREF(compiled);
    if (compiled == NULL && codes != NULL && late_future_import()) {
        PyErr_Clear();
        added = compile_statements(body, filename, codes, lasting);
    }
    if (added == 0 && interactive != NULL) {
        compiled = compile_node(interactive, filename, "single");
        added = compiled != NULL ? PyList_Append(codes, compiled) : -1;
        if (compiled != NULL && defines_code(compiled))
            *lasting = true;
        Py_XDECREF(compiled);
    }
    if (added == 0)
        rc = run_codes(codes, globals);
    Py_XDECREF(codes);
out:
    Py_XDECREF(interactive);
    Py_XDECREF(last);
    Py_XDECREF(body);
    Py_XDECREF(mod);
    return rc;
}
