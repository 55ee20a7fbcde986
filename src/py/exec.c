/*
 * exec.c -- running a cell (and pyc._shell around it), user_expressions, is_complete, and fork-isolated cells.
 *
 * A cell is compiled and run by cell.c (the fast path for cells whose result cannot be shown, the AST path
 * with IPython's last-expression display otherwise, linecache).  Here it is named, wrapped in the shell's
 * pre- and post-cell events, retried through the IPython-style transforms when it does not parse, and its
 * error becomes an error content in error.c.  The cell is compiled under the file name the debugger protocol
 * gives its text (cellfile.h: the same name JupyterLab computes, so that its breakpoints map, as with
 * ipykernel).  Its source stays registered in linecache after it only when something may still ask for its
 * lines (cell.c explains when).
 */
#include "pyint.h"

#include <stdatomic.h>
#include <stdint.h>

#include <string.h>

#include "cellfile.h"

static unsigned long cell_serial;

json_t *
pyc_py_support_call(const char *module, const char *name, json_t *args)
{
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *f = pyc__py_support(module, name);
    PyObject *a = f != NULL && args != NULL ? pyc__py_from_json(args) : NULL;
    PyObject *t = a != NULL && PyList_Check(a) ? PyList_AsTuple(a) : NULL;
    PyObject *r = t != NULL ? PyObject_CallObject(f, t) : NULL;
    json_t *out = r != NULL ? pyc__py_to_json(r) : NULL;
    if (out == NULL)
        pyc__py_report(name);
    Py_XDECREF(r);
    Py_XDECREF(t);
    Py_XDECREF(a);
    PyGILState_Release(g);
    return out;
}

int
pyc_py_preload(const char *module)
{
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *m = PyImport_ImportModule(module);
    if (m == NULL)
        pyc__py_report(module);
    Py_XDECREF(m);
    PyGILState_Release(g);
    return m != NULL ? 0 : -1;
}

void
pyc_py_warm_for_fork(void)
{
    Py_XDECREF(pyc__py_call_support("pyc._shell", "prepare_fork", "preparing the namespace for forks"));
}

/* Before a cell that is not silent: pyc._shell.pre_cell records its source as In[count]; returns true when
 * an IPython shell wants post_cell after it.  A failure is reported and does not stop the cell. */
static bool
shell_pre_cell(const char *code, const pyc_py_exec_opts_t *opts)
{
    PyObject *f = pyc__py_support("pyc._shell", "pre_cell");
    PyObject *r = f != NULL ? PyObject_CallFunction(f, "isO", opts->execution_count, code,
                                                    opts->store_history ? Py_True : Py_False)
                            : NULL;
    if (r == NULL) {
        if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
            /* The interrupt was meant for the cell, which is about to run: let it reach the cell's first
             * bytecode instead of being swallowed here (the cell would then run on uninterrupted). */
            PyErr_Clear();
            PyErr_SetInterrupt();
            return false;
        }
        pyc__py_report("recording the cell in In");
        return false;
    }
    bool want = PyObject_IsTrue(r) == 1;
    Py_DECREF(r);
    return want;
}

/* After the cell, when shell_pre_cell asked for it: the shell's post_execute and post_run_cell events.  The
 * cell's exception, if any, is kept pending across the call. */
static void
shell_post_cell(bool ok)
{
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    if (!ok) {
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value != NULL && tb != NULL)
            PyException_SetTraceback(value, tb);
    }
    PyObject *f = pyc__py_support("pyc._shell", "post_cell");
    PyObject *r = f != NULL ? PyObject_CallFunction(f, "OO", ok ? Py_True : Py_False, value != NULL ? value : Py_None)
                            : NULL;
    if (r == NULL)
        pyc__py_report("the shell's post_run_cell");
    Py_XDECREF(r);
    if (!ok)
        PyErr_Restore(type, value, tb);
}

/* Calls pyc.<module>.<func>(*args) from the embedded package; returns a new reference or NULL with a
 * Python error set. */
static PyObject *
call_support(const char *module, const char *func, PyObject *args)
{
    PyObject *fn = pyc__py_support(module, func);
    return fn != NULL ? PyObject_CallObject(fn, args) : NULL;
}

/* Runs the cell as pyc._transform.transform_cell(code, globals) rewrites it (IPython's input language:
 * pasted prompts, automagic, !cmd, %magic, obj?), compiled under the original text's file name.  Called when
 * the cell did not parse (its SyntaxError pending), or before it is compiled when ipyinput.c says it may be
 * IPython's (no error pending).  When the transform changes nothing, or fails, returns -2 with the pending
 * error, if any, restored: the caller's outcome stands. */
static int
run_transformed(const char *code, PyObject *filename, PyObject *globals, bool silent, bool *lasting)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *args = Py_BuildValue("(sO)", code, globals);
    PyObject *t = args != NULL ? call_support("pyc._transform", "transform_cell", args) : NULL;
    Py_XDECREF(args);
    const char *tcode = t != NULL && PyUnicode_Check(t) ? PyUnicode_AsUTF8(t) : NULL;
    if (tcode == NULL || strcmp(tcode, code) == 0) {
        Py_XDECREF(t);
        PyErr_Clear();
        PyErr_Restore(type, value, tb);
        return -2;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    int rc = pyc__py_run_cell(tcode, filename, globals, silent, lasting);
    Py_DECREF(t);
    /* The rewritten cell does not parse either: its SyntaxError (pending) is the cell's error, and the
     * caller must not compile the original text again with it set. */
    return rc == -2 ? -1 : rc;
}

/* After every cell: the finder's after_cell (matplotlib figures, MPLBACKEND), only once matplotlib is
 * loaded.  Its failure is reported on stderr and does not change the cell's outcome. */
static void
after_cell(void)
{
    PyObject *type, *value, *tb;
    PyObject *modules = PyImport_GetModuleDict();
    if (pyc__py_finder == NULL || PyDict_GetItemString(modules, "matplotlib") == NULL)
        return;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = PyObject_CallMethod(pyc__py_finder, "after_cell", NULL);
    if (r == NULL)
        pyc__py_report("showing figures");
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
}

/* Turns a support function's dict result into a reply content; failures become error replies. */
static json_t *
support_reply(PyObject *r)
{
    json_t *out = r != NULL && PyDict_Check(r) ? pyc__py_to_json(r) : NULL;
    Py_XDECREF(r);
    if (out == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "support function did not return a dict");
        out = pyc__py_error_content();
        json_object_set_new(out, "status", json_string("error"));
    }
    return out;
}

json_t *
pyc_py_complete(const char *code, long cursor_pos)
{
    PyObject *main = PyImport_AddModule("__main__");
    PyObject *args = Py_BuildValue("(slO)", code, cursor_pos, PyModule_GetDict(main));
    PyObject *r = args != NULL ? call_support("pyc._complete", "request", args) : NULL;
    Py_XDECREF(args);
    return support_reply(r);
}

void
pyc_py_complete_warm_up(void)
{
    /* warm_up catches what jedi raises; what is left (no pyc._complete) only means a completer that stays
     * cold, and this runs between requests, where there is no cell to report to. */
    PyObject *r = call_support("pyc._complete", "warm_up", NULL);
    if (r == NULL)
        PyErr_Clear();
    Py_XDECREF(r);
}

json_t *
pyc_py_inspect(const char *code, long cursor_pos, int detail_level)
{
    PyObject *main = PyImport_AddModule("__main__");
    PyObject *args = Py_BuildValue("(sliO)", code, cursor_pos, detail_level, PyModule_GetDict(main));
    PyObject *r = args != NULL ? call_support("pyc._inspect", "inspect", args) : NULL;
    Py_XDECREF(args);
    return support_reply(r);
}

void
pyc_py_comm(const pyc_msg_t *msg)
{
    const char *msg_type = msg->msg_type;
    PyObject *c = pyc__py_from_json(msg->content), *md = pyc__py_from_json(msg->metadata);
    /* Writable views of the received frames, not copies, so that unpickled NumPy arrays use the memory as it
     * is (zerocopy.c). */
    PyObject *bufs = c != NULL && md != NULL ? pyc__py_msg_buffers(msg) : NULL;
    PyObject *r = NULL;
    if (bufs != NULL) {
        PyObject *args = Py_BuildValue("(sOOO)", msg_type, c, md, bufs);
        r = args != NULL ? call_support("pyc._comm", "dispatch", args) : NULL;
        Py_XDECREF(args);
    }
    if (r == NULL)
        pyc__py_report(msg_type);
    Py_XDECREF(r);
    Py_XDECREF(c);
    Py_XDECREF(md);
    Py_XDECREF(bufs);
}

json_t *
pyc_py_comm_info(json_t *content)
{
    json_t *target = json_object_get(content, "target_name");
    PyObject *args = Py_BuildValue("(s)", json_is_string(target) ? json_string_value(target) : NULL);
    PyObject *r = args != NULL ? call_support("pyc._comm", "comm_info", args) : NULL;
    Py_XDECREF(args);
    json_t *comms = r != NULL && PyDict_Check(r) ? pyc__py_to_json(r) : NULL;
    Py_XDECREF(r);
    if (comms == NULL) {
        PyErr_Clear();
        comms = json_object();
    }
    return json_pack("{s:s, s:o}", "status", "ok", "comms", comms);
}

static json_t *
eval_user_expressions(json_t *exprs, PyObject *globals)
{
    json_t *out = json_object();
    const char *key;
    json_t *value;
    if (exprs == NULL)
        return out;
    json_object_foreach(exprs, key, value) {
        if (!json_is_string(value))
            continue;
        PyObject *r = PyRun_String(json_string_value(value), Py_eval_input, globals, globals);
        if (r == NULL) {
            json_t *e = pyc__py_error_content();
            json_object_set_new(e, "status", json_string("error"));
            json_object_set_new(out, key, e);
            continue;
        }
        json_t *md, *data = pyc__py_format_json(r, &md);
        if (data == NULL) {
            PyErr_Clear();
            data = json_pack("{s:s}", "text/plain", "");
            md = json_object();
        }
        Py_DECREF(r);
        json_object_set_new(out, key, json_pack("{s:s, s:o, s:o}", "status", "ok", "data", data, "metadata", md));
    }
    return out;
}

/* Clears a SIGINT that arrived too late to interrupt the cell, so it cannot surface in the next one. */
static void
discard_late_interrupt(void)
{
    pyc__py_executing = 0;
    if (PyErr_CheckSignals() < 0)
        PyErr_Clear();
    pyc__py_interrupted = 0;
}

/* The number of the running cell, for a MemoryError asked for from another thread (pyc_py_raise_memory_error)
 * that must be raised in that cell and in no later one. */
static atomic_uint cell_seq;
static char pending_message[256];
/* 1 + the cell_seq whose SIGINT is to raise MemoryError instead of KeyboardInterrupt; 0 when none. */
static atomic_uint memory_error_for;

/* Runs in the main thread, where the interpreter looks at pending calls: raises MemoryError in the cell
 * that was running when it was asked for. */
static int
raise_memory_error(void *seq)
{
    if (!pyc__py_cell.running || (unsigned)(uintptr_t)seq != atomic_load(&cell_seq))
        return 0;
    PyErr_SetString(PyExc_MemoryError, pending_message);
    return -1;
}

void
pyc_py_raise_memory_error(const char *message)
{
    snprintf(pending_message, sizeof pending_message, "%s", message);
    atomic_store(&memory_error_for, atomic_load(&cell_seq) + 1);
}

bool
pyc__py_memory_error_on_sigint(void)
{
    /* In the SIGINT handler, on the main thread: CPython 3.11 wakes the eval loop for a pending call only when
     * it is added by the main thread itself (COMPUTE_EVAL_BREAKER checks the calling thread), hence this
     * detour through a signal.  Py_AddPendingCall is safe here: the kernel adds no other pending calls, so
     * the main thread cannot be inside the pending-call machinery when the signal comes. */
    unsigned want = atomic_exchange(&memory_error_for, 0);
    if (want == 0)
        return false;
    Py_AddPendingCall(raise_memory_error, (void *)(uintptr_t)(want - 1));
    return true;
}

/* Runs a cell in __main__ as the calling thread's cell: the main shell's (cell is pyc__py_cell, and SIGINT
 * interrupts it), or a subshell's (cell is that thread's own, and In/Out are left to the main shell). */
static void
execute_as(pyc__py_cell_t *cell, const char *code, const pyc_py_exec_opts_t *opts, pyc_py_exec_result_t *res)
{
    PyObject *main = PyImport_AddModule("__main__");     /* borrowed */
    PyObject *globals = main != NULL ? PyModule_GetDict(main) : NULL;
    bool is_main = cell == &pyc__py_cell;

    res->ok = true;
    res->error = NULL;
    res->user_expressions = NULL;
    json_decref(cell->payload);
    *cell = (pyc__py_cell_t){
        .running = 1,
        .silent = opts->silent,
        .allow_stdin = opts->allow_stdin,
        .execution_count = opts->execution_count,
        .plain = opts->plain_errors,
        .payload = json_array(),
    };
    if (is_main) {
        /* A caller that armed the cell before it waited for the GIL (run_cell) keeps what came since: that
         * interrupt is this cell's (pyc__py_interrupt_reassert). */
        if (!pyc__py_executing)
            pyc__py_interrupted = 0;
        atomic_fetch_add(&cell_seq, 1);
        pyc__py_executing = 1;
        pyc__py_async_current();
    }
    bool post = is_main && !opts->silent && globals != NULL && shell_pre_cell(code, opts);
    pyc__py_debug_trace();
    char name[512];
    if (pyc_cellfile_name(code, strlen(code), name, sizeof name) < 0)
        snprintf(name, sizeof name, "<cell-%lu>", ++cell_serial);  /* a $TMPDIR too long to name files in */
    PyObject *filename = globals != NULL ? PyUnicode_FromString(name) : NULL;
    bool known = filename != NULL && pyc__py_cell_source_known(filename), lasting = false;
    /* The transforms run once: before compiling, for a cell that may be IPython's although it parses
     * (ipyinput.c), else when the cell does not parse.  A cell they leave unchanged is compiled as it is. */
    int rc = -2;
    bool transformed = filename != NULL && pyc__py_ipython_input(code);
    if (transformed)
        rc = run_transformed(code, filename, globals, opts->silent, &lasting);
    if (rc == -2)
        rc = filename != NULL ? pyc__py_run_cell(code, filename, globals, opts->silent, &lasting) : -1;
    if (rc == -2 && !transformed)
        rc = run_transformed(code, filename, globals, opts->silent, &lasting);
    after_cell();
    if (post)
        shell_post_cell(rc == 0);
    if (rc < 0) {
        res->ok = false;
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "the kernel lost its __main__ module");
        res->error = pyc__py_error_content();
    }
    /* After the error content, whose traceback read the cell's lines. */
    if (rc == 0 && !known && !lasting && !pyc__py_debugging())
        pyc__py_cell_forget_source(filename);
    Py_XDECREF(filename);
    if (res->ok)
        res->user_expressions = eval_user_expressions(opts->user_expressions, globals);
    else
        res->user_expressions = json_object();
    if (is_main)
        discard_late_interrupt();
    res->payload = cell->payload;
    cell->payload = NULL;
    cell->running = 0;
}

void
pyc_py_execute(const char *code, const pyc_py_exec_opts_t *opts, pyc_py_exec_result_t *res)
{
    execute_as(&pyc__py_cell, code, opts, res);
}

void
pyc_py_execute_subshell(const char *code, const pyc_py_exec_opts_t *opts, pyc_py_exec_result_t *res)
{
    pyc__py_cell_t cell = {0};
    PyGILState_STATE g = PyGILState_Ensure();
    pyc__py_subcell = &cell;
    pyc__py_in_cell(true, opts->cell_token);
    execute_as(&cell, code, opts, res);
    pyc__py_in_cell(false, opts->cell_token);
    pyc__py_subcell = NULL;
    PyGILState_Release(g);
}

json_t *
pyc_py_is_complete(const char *code)
{
    PyObject *args = Py_BuildValue("(s)", code);
    PyObject *r = args != NULL ? call_support("pyc._is_complete", "is_complete", args) : NULL;
    Py_XDECREF(args);
    json_t *out;
    const char *st;
    PyObject *indent;
    if (r != NULL && PyArg_ParseTuple(r, "sO", &st, &indent)) {
        out = json_pack("{s:s}", "status", st);
        if (PyUnicode_Check(indent))
            json_object_set_new(out, "indent", json_string(PyUnicode_AsUTF8(indent)));
    } else {
        PyErr_Clear();
        out = json_pack("{s:s}", "status", "unknown");
    }
    Py_XDECREF(r);
    return out;
}

/* ---- fork-isolated cells ----------------------------------------------------------------------------- */

static int
isolate_call(const char *func, PyObject *args, PyObject **out, pyc_error_t *err)
{
    *out = call_support("pyc._isolate", func, args);
    if (*out != NULL)
        return 0;
    json_t *e = pyc__py_error_content();
    pyc_error_set(err, "pyc._isolate.%s: %s: %s", func, json_string_value(json_object_get(e, "ename")),
                  json_string_value(json_object_get(e, "evalue")));
    json_decref(e);
    return -1;
}

int
pyc_py_isolate_snapshot(pyc_error_t *err)
{
    PyObject *r;
    if (isolate_call("snapshot", NULL, &r, err) < 0)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* Splits a (blob, merged, skipped) or (merged, skipped) tuple into C values. */
static int
isolate_unpack(PyObject *r, int with_blob, char **blob, size_t *len, json_t **merged, json_t **skipped,
               pyc_error_t *err)
{
    Py_ssize_t base = with_blob ? 1 : 0;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != base + 2) {
        Py_DECREF(r);
        return pyc_error_set(err, "pyc._isolate returned an unexpected value");
    }
    if (with_blob) {
        PyObject *b = PyTuple_GET_ITEM(r, 0);
        if (!PyBytes_Check(b) || (*blob = malloc((size_t)PyBytes_GET_SIZE(b) + 1)) == NULL) {
            Py_DECREF(r);
            return pyc_error_set(err, "pyc._isolate: no pickle to send back");
        }
        memcpy(*blob, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
        *len = (size_t)PyBytes_GET_SIZE(b);
    }
    *merged = pyc__py_to_json(PyTuple_GET_ITEM(r, base));
    *skipped = pyc__py_to_json(PyTuple_GET_ITEM(r, base + 1));
    Py_DECREF(r);
    if (*merged == NULL || *skipped == NULL) {
        PyErr_Clear();
        json_decref(*merged);
        json_decref(*skipped);
        *merged = json_array();
        *skipped = json_object();
    }
    return 0;
}

int
pyc_py_isolate_collect(char **blob, size_t *len, json_t **merged, json_t **skipped, pyc_error_t *err)
{
    PyObject *r;
    if (isolate_call("collect", NULL, &r, err) < 0)
        return -1;
    return isolate_unpack(r, 1, blob, len, merged, skipped, err);
}

int
pyc_py_isolate_merge(const void *blob, size_t len, json_t **merged, json_t **skipped, pyc_error_t *err)
{
    PyObject *r, *args = Py_BuildValue("(y#)", (const char *)blob, (Py_ssize_t)len);
    if (args == NULL)
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    int rc = isolate_call("merge", args, &r, err);
    Py_DECREF(args);
    if (rc < 0)
        return -1;
    return isolate_unpack(r, 0, NULL, NULL, merged, skipped, err);
}

void
pyc_py_interrupt_arm(void)
{
    pyc__py_interrupted = 0;
    pyc__py_executing = 1;
}

void
pyc_py_interrupt_disarm(void)
{
    discard_late_interrupt();
}
