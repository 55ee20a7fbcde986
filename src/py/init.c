/*
 * init.c -- starting and stopping the embedded interpreter, the GIL helpers, SIGINT, and the _pyc module.
 *
 * Start-up follows the PyConfig sequence (InitPythonConfig, set fields, InitializeFromConfig, Clear).
 * sys.executable is the real interpreter that matches libpython (configure finds it), so subprocess and
 * multiprocessing start a Python, not another kernel.
 *
 * SIGINT: Python installs its handler at start-up; we replace it at the C level with one that forwards to
 * Python (PyErr_SetInterrupt, which is async-signal-safe) only while a cell runs.  SIGINT while idle is
 * therefore ignored instead of surfacing as a KeyboardInterrupt in the next cell.  The handler has no
 * SA_RESTART, so a cell blocked in time.sleep or a read wakes with EINTR and sees the KeyboardInterrupt.
 */
#include "pyint.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* SIGINTs that reached a running cell (an interrupt_request, a signal from the client, a deadline). */
static atomic_uint interrupt_count;

static PyThreadState *main_ts;
static pthread_t main_thread;     /* the thread pyc_py_init ran on */
static char version[32];

/* The boot code (kernel/python/_pyc_boot.py, compiled into the program with the package) installs the
 * finder that serves the `pyc` package; see that file for what else the finder does. */
#define BOOT_FILE "_pyc_boot.py"

/* Installs the finder for the embedded package by running the boot code.  The files stay in the program's
 * read-only data: the finder sees them as memoryviews, copied only when a module is compiled. */
static int
install_finder(const pyc_embedded_file_t *files)
{
    PyObject *d = PyDict_New(), *g = PyDict_New(), *code = NULL;
    const pyc_embedded_file_t *boot = NULL;
    int rc = -1;
    if (d == NULL || g == NULL)
        goto out;
    for (const pyc_embedded_file_t *f = files; f != NULL && f->name != NULL; f++) {
        if (strcmp(f->name, BOOT_FILE) == 0)
            boot = f;
        PyObject *mv = PyMemoryView_FromMemory((char *)f->data, (Py_ssize_t)f->size, PyBUF_READ);
        if (mv == NULL || PyDict_SetItemString(d, f->name, mv) < 0) {
            Py_XDECREF(mv);
            goto out;
        }
        Py_DECREF(mv);
    }
    if (boot == NULL) {
        PyErr_SetString(PyExc_ImportError, BOOT_FILE " is not compiled into this program");
        goto out;
    }
    PyObject *name = PyUnicode_FromString("_pyc_boot");
    int set = name == NULL || PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins()) < 0 ||
              PyDict_SetItemString(g, "__name__", name) < 0 || PyDict_SetItemString(g, "files", d) < 0;
    Py_XDECREF(name);
    if (set)
        goto out;
    PyObject *src = PyBytes_FromStringAndSize((const char *)boot->data, (Py_ssize_t)boot->size);
    code = src != NULL ? Py_CompileStringExFlags(PyBytes_AS_STRING(src), "<pyc>/" BOOT_FILE, Py_file_input,
                                                 NULL, -1)
                       : NULL;
    Py_XDECREF(src);
    if (code == NULL)
        goto out;
    PyObject *r = PyEval_EvalCode(code, g, g);
    if (r == NULL)
        goto out;
    Py_DECREF(r);
    pyc__py_finder = PyDict_GetItemString(g, "finder");
    Py_XINCREF(pyc__py_finder);
    rc = pyc__py_finder != NULL ? 0 : -1;
out:
    Py_XDECREF(code);
    Py_XDECREF(d);
    Py_XDECREF(g);
    return rc;
}

static void
on_sigint(int sig)
{
    (void)sig;
    if (pyc__py_executing) {
        if (pyc__py_memory_error_on_sigint())
            return;
        pyc__py_interrupted = 1;
        atomic_fetch_add(&interrupt_count, 1);
        PyErr_SetInterrupt();
    }
}

unsigned
pyc_py_interrupt_count(void)
{
    return atomic_load(&interrupt_count);
}

bool
pyc_py_interrupt_pending(void)
{
    return pyc__py_interrupted != 0;
}

static struct PyModuleDef pyc_module_def;

static PyObject *
module_init(void)
{
    return pyc__py_module_init();
}

/* _pyc.main_thread_ident(): the Python ident of the kernel's main thread (pyc._threads keeps it the main
 * thread of threading when a subshell imports threading first). */
static PyObject *
py_main_thread_ident(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyLong_FromUnsignedLong(pyc__py_main_ident);
}

PyObject *
pyc__py_module_init(void)
{
    static PyMethodDef methods[32];
    size_t n = 0;
    methods[n++] = (PyMethodDef){"main_thread_ident", (PyCFunction)py_main_thread_ident, METH_NOARGS,
                                 "The Python ident of the kernel's main thread."};
    for (PyMethodDef *m = pyc__py_display_methods; m->ml_name != NULL; m++)
        methods[n++] = *m;
    for (PyMethodDef *m = pyc__py_input_methods; m->ml_name != NULL; m++)
        methods[n++] = *m;
    for (PyMethodDef *m = pyc__py_async_methods; m->ml_name != NULL; m++)
        methods[n++] = *m;
    methods[n] = (PyMethodDef){NULL, NULL, 0, NULL};
    pyc_module_def = (struct PyModuleDef){
        PyModuleDef_HEAD_INIT, "_pyc", "Support of the pyc kernel, in C: streams, display, input.", -1,
        methods, NULL, NULL, NULL, NULL,
    };
    PyObject *m = PyModule_Create(&pyc_module_def);
    if (m == NULL)
        return NULL;
    /* Raised by input() when the frontend cannot answer, as IPython's exception of the same name. */
    PyObject *exc = PyErr_NewExceptionWithDoc("_pyc.StdinNotImplementedError",
                                              "input() was called, but the frontend does not support stdin.",
                                              PyExc_NotImplementedError, NULL);
    if (exc == NULL || PyModule_AddObject(m, "StdinNotImplementedError", exc) < 0) {
        Py_XDECREF(exc);
        Py_DECREF(m);
        return NULL;
    }
    if (pyc__py_stream_ready(m) < 0 || pyc__py_zerocopy_ready(m) < 0 || pyc__py_ipyinput_ready(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* Replaces sys.stdout/stderr/displayhook and builtins.input/display with the kernel's. */
static int
install_hooks(pyc_error_t *err)
{
    PyObject *mod = PyImport_ImportModule("_pyc");
    PyObject *out = NULL, *errs = NULL, *hook = NULL, *builtins = NULL;
    int rc = -1;
    if (mod == NULL)
        goto out;
    out = pyc__py_stream_new(0);
    errs = pyc__py_stream_new(1);
    hook = PyObject_GetAttrString(mod, "displayhook");
    if (out == NULL || errs == NULL || hook == NULL)
        goto out;
    if (PySys_SetObject("stdout", out) < 0 || PySys_SetObject("stderr", errs) < 0 ||
        PySys_SetObject("__stdout__", out) < 0 || PySys_SetObject("__stderr__", errs) < 0 ||
        PySys_SetObject("displayhook", hook) < 0)
        goto out;
    builtins = PyImport_ImportModule("builtins");
    if (builtins == NULL)
        goto out;
    static const char *const names[] = {"input", "display"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        PyObject *f = PyObject_GetAttrString(mod, names[i]);
        if (f == NULL || PyObject_SetAttrString(builtins, names[i], f) < 0) {
            Py_XDECREF(f);
            goto out;
        }
        Py_DECREF(f);
    }
    /* getpass.getpass asks the frontend too.  The boot finder sets it when getpass is first imported
     * (_pyc_boot.py, AFTER); here only when something imported getpass before the finder was installed (a
     * sitecustomize), so that start-up does not import it (with termios, about 1 ms and 200 KB). */
    PyObject *gp_name = PyUnicode_FromString("getpass");
    PyObject *gp = gp_name != NULL ? PyImport_GetModule(gp_name) : NULL;
    Py_XDECREF(gp_name);
    if (gp != NULL && gp != Py_None) {
        PyObject *f = PyObject_GetAttrString(mod, "getpass");
        int gp_rc = f != NULL ? PyObject_SetAttrString(gp, "getpass", f) : -1;
        Py_XDECREF(f);
        Py_DECREF(gp);
        if (gp_rc < 0)
            goto out;
    } else if (gp != NULL) {
        Py_DECREF(gp);           /* sys.modules["getpass"] = None: nothing to patch */
    } else if (PyErr_Occurred()) {
        goto out;
    }
    rc = 0;
out:
    if (rc < 0) {
        PyErr_Print();
        pyc_error_set(err, "could not install the kernel's streams and hooks in Python");
    }
    Py_XDECREF(mod);
    Py_XDECREF(out);
    Py_XDECREF(errs);
    Py_XDECREF(hook);
    Py_XDECREF(builtins);
    return rc;
}

/* The environment the interpreter runs in, for kernel_info: {"prefix", "base_prefix", "executable", "venv"}. */
static json_t *environment;

static void
record_environment(void)
{
    PyObject *prefix = PySys_GetObject("prefix"), *base = PySys_GetObject("base_prefix");   /* borrowed */
    PyObject *exe = PySys_GetObject("executable");
    const char *p = prefix != NULL ? PyUnicode_AsUTF8(prefix) : NULL;
    const char *b = base != NULL ? PyUnicode_AsUTF8(base) : NULL;
    const char *e = exe != NULL ? PyUnicode_AsUTF8(exe) : NULL;
    PyErr_Clear();
    environment = json_pack("{s:s?, s:s?, s:s?, s:b}", "prefix", p, "base_prefix", b, "executable", e, "venv",
                            p != NULL && b != NULL && strcmp(p, b) != 0);
}

json_t *
pyc_py_environment(void)
{
    return environment != NULL ? json_deep_copy(environment) : json_object();   /* any thread: a copy */
}

int
pyc_py_init(const pyc_py_config_t *cfg, const pyc_py_host_t *host, pyc_error_t *err)
{
    PyStatus st;
    PyConfig config;

    pyc__py_host = *host;
    if (PyImport_AppendInittab("_pyc", module_init) < 0)
        return pyc_error_set(err, "could not register the _pyc module");

    /* A kernel started with SIGINT ignored (a background job of a non-interactive shell, nohup) would stay
     * uninterruptible: CPython installs its KeyboardInterrupt handler only over the default action, and
     * PyErr_SetInterrupt does nothing for a signal it sees ignored.  An interrupt must reach a cell, as in
     * ipykernel (which sets its own handler): the default action first, for CPython to take over. */
    signal(SIGINT, SIG_DFL);
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 1;
    config.parse_argv = 0;
    st = PyConfig_SetBytesString(&config, &config.program_name, cfg->python_exe);
    if (!PyStatus_Exception(st))
        st = PyConfig_SetBytesString(&config, &config.executable, cfg->python_exe);
    if (!PyStatus_Exception(st)) {
        char *argv[] = {""};
        st = PyConfig_SetBytesArgv(&config, 1, argv);
    }
    if (!PyStatus_Exception(st))
        st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st))
        return pyc_error_set(err, "could not start Python: %s", st.err_msg != NULL ? st.err_msg : "unknown error");
    pyc__py_hugepages_install();

    snprintf(version, sizeof version, "%d.%d.%d", PY_MAJOR_VERSION, PY_MINOR_VERSION, PY_MICRO_VERSION);
    const char *v = Py_GetVersion();
    size_t vl = strcspn(v, " ");
    if (vl > 0 && vl < sizeof version)
        snprintf(version, sizeof version, "%.*s", (int)vl, v);

    /* The directory a notebook runs in comes first on sys.path, as '' does for `python -i`: an embedded
     * interpreter does not get that entry, and `import helper` of a file beside the notebook needs it. */
    PyObject *path = PySys_GetObject("path");
    PyObject *here = PyUnicode_FromString("");
    int path_rc = path != NULL && here != NULL && PyList_Check(path) ? PyList_Insert(path, 0, here) : -1;
    Py_XDECREF(here);
    if (path_rc < 0)
        PyErr_Clear();
    if (install_hooks(err) < 0)
        return -1;
    if (install_finder(cfg->python_files) < 0) {
        PyErr_Print();
        return pyc_error_set(err, "could not install the importer of the embedded pyc package");
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    main_thread = pthread_self();
    pyc__py_main_ident = PyThread_get_thread_ident();
    record_environment();
    main_ts = PyEval_SaveThread();
    return 0;
}

/* On threads other than the main one (a subshell's), pyc_py_enter takes the GIL with a thread state of
 * their own, kept between enter and leave. */
static _Thread_local PyGILState_STATE other_gil;

void
pyc_py_enter(void)
{
    if (!pthread_equal(pthread_self(), main_thread)) {
        other_gil = PyGILState_Ensure();
        return;
    }
    PyEval_RestoreThread(main_ts);
    pyc__py_release_lent();       /* exports ZeroMQ gave back while Python was left (zerocopy.c) */
}

void
pyc_py_leave(void)
{
    if (!pthread_equal(pthread_self(), main_thread)) {
        PyGILState_Release(other_gil);
        return;
    }
    main_ts = PyEval_SaveThread();
}

const char *
pyc_py_version(void)
{
    return version;
}

void
pyc_py_finalize(void)
{
    if (Py_FinalizeEx() < 0) {
        /* Flushing a stream failed at exit; nothing more can be done. */
    }
}

/* Calls module.name() of a module already imported, if it is (a module nobody imported has nothing to do at
 * exit); an exception is reported and cleared. */
static void
call_if_imported(const char *module, const char *name)
{
    PyObject *mod_name = PyUnicode_FromString(module);
    PyObject *mod = mod_name != NULL ? PyImport_GetModule(mod_name) : NULL;
    Py_XDECREF(mod_name);
    PyObject *r = mod != NULL ? PyObject_CallMethod(mod, name, NULL) : NULL;
    if (r == NULL && PyErr_Occurred())
        PyErr_WriteUnraisable(NULL);
    Py_XDECREF(r);
    Py_XDECREF(mod);
}

static void
flush_std(const char *name)
{
    PyObject *f = PySys_GetObject(name);     /* borrowed */
    PyObject *r = f != NULL && f != Py_None ? PyObject_CallMethod(f, "flush", NULL) : NULL;
    if (r == NULL)
        PyErr_Clear();
    Py_XDECREF(r);
}

void
pyc_py_finish(void)
{
    call_if_imported("threading", "_shutdown");
    call_if_imported("atexit", "_run_exitfuncs");
    /* As CPython's module teardown clears a module's dict: names with one leading underscore first (the
     * results kept as _N and _), then the rest but __builtins__, each set to None rather than removed, so
     * that a finalizer that looks a global up finds None, as it would there. */
    PyObject *main_mod = PyImport_AddModule("__main__");        /* borrowed */
    PyObject *ns = main_mod != NULL ? PyModule_GetDict(main_mod) : NULL;
    PyObject *keys = ns != NULL ? PyDict_Keys(ns) : NULL;
    for (int pass = 0; keys != NULL && pass < 2; pass++) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
            PyObject *key = PyList_GET_ITEM(keys, i);
            const char *s = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
            if (s == NULL) {
                PyErr_Clear();
                continue;
            }
            bool first = s[0] == '_' && s[1] != '_';
            if ((pass == 0) != first || strcmp(s, "__builtins__") == 0)
                continue;
            if (PyDict_SetItem(ns, key, Py_None) < 0)
                PyErr_WriteUnraisable(NULL);
        }
    }
    Py_XDECREF(keys);
    if (PyErr_Occurred())
        PyErr_WriteUnraisable(NULL);
    /* The results kept beside the namespace, and what only cycles held: pyc._shell.let_go. */
    Py_XDECREF(pyc__py_call_support("pyc._shell", "let_go", "letting the session's values go at its end"));
    flush_std("stdout");
    flush_std("stderr");
}

void
pyc_py_fork_prepare(void)
{
    PyOS_BeforeFork();
}

void
pyc_py_fork_done(pid_t pid)
{
    if (pid == 0) {
        PyOS_AfterFork_Child();
        pyc__py_interrupted = 0;
        pyc__py_executing = 0;
        pyc__py_debug_forget();
    } else {
        PyOS_AfterFork_Parent();
    }
}

int
pyc_py_faulthandler(int fd, pyc_error_t *err)
{
    PyObject *fh = PyImport_ImportModule("faulthandler");
    PyObject *r = fh != NULL ? PyObject_CallMethod(fh, "enable", "(ii)", fd, 1) : NULL;
    Py_XDECREF(fh);
    if (r == NULL) {
        pyc__py_report("enabling faulthandler");
        return pyc_error_set(err, "crash reports are off: faulthandler could not be enabled");
    }
    Py_DECREF(r);
    return 0;
}
