/*
 * startup.c -- the start-up files an IPython kernel runs, run by pyc at start: the file named by
 * PYTHONSTARTUP, then the .py and .ipy files in the startup directories of the IPython profile and of the
 * system's IPython configuration (README "Start-up files").  E2B and other hosts configure kernels so.
 *
 * The kernel starts in about 20 ms and most kernels have no start-up file, so the check is done here in C
 * without the GIL: two getenv and four opendir(2) calls, and a readdir of a directory that exists (2 us when
 * none does, 3 us for IPython's profile directory with its README).  Only when PYTHONSTARTUP is set or a
 * startup directory holds a .py or .ipy file is the Python part (pyc/_startup.py) imported; it runs the
 * files as IPython's InteractiveShellApp._run_startup_files does.
 */
#include "pyint.h"

#include <dirent.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_DIRS = 4 };

/* True when the directory holds a file IPython would run: a name that does not start with '.' (glob's
 * rule) and ends with .py or .ipy.  A missing directory costs what a stat(2) does; IPython's own profile
 * directory holds only a README until a start-up file is put there. */
static bool
has_startup_files(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        found = e->d_name[0] != '.' && ((len > 3 && strcmp(e->d_name + len - 3, ".py") == 0) ||
                                        (len > 4 && strcmp(e->d_name + len - 4, ".ipy") == 0));
    }
    closedir(d);
    return found;
}

/* The IPython directory as IPython's get_ipython_dir finds it: $IPYTHONDIR (a leading ~ expanded), else
 * ~/.ipython.  Returns false when there is no home to find it in, or the path does not fit. */
static bool
ipython_dir(char *out, size_t cap)
{
    const char *env = getenv("IPYTHONDIR");
    const char *home = getenv("HOME");
    if (home == NULL || home[0] == '\0') {
        struct passwd *pw = getpwuid(getuid());
        home = pw != NULL ? pw->pw_dir : NULL;
    }
    int n;
    if (env != NULL && env[0] != '\0') {
        if (env[0] == '~' && (env[1] == '/' || env[1] == '\0')) {
            if (home == NULL)
                return false;
            n = snprintf(out, cap, "%s%s", home, env + 1);
        } else {
            n = snprintf(out, cap, "%s", env);
        }
    } else {
        if (home == NULL)
            return false;
        n = snprintf(out, cap, "%s/.ipython", home);
    }
    return n > 0 && (size_t)n < cap;
}

/* Fills dirs with the startup directories that hold start-up files, in IPython's order (the profile's, then
 * sys.prefix/etc/ipython, /usr/local/etc/ipython, /etc/ipython: IPython's ENV_CONFIG_DIRS and
 * SYSTEM_CONFIG_DIRS); returns how many.  prefix is sys.prefix, or NULL. */
static int
startup_dirs(const char *prefix, char dirs[MAX_DIRS][PATH_MAX])
{
    char candidates[MAX_DIRS][PATH_MAX];
    int n = 0, found = 0;
    char ipdir[PATH_MAX - 64];
    if (ipython_dir(ipdir, sizeof ipdir))
        snprintf(candidates[n++], PATH_MAX, "%s/profile_default/startup", ipdir);
    /* IPython leaves sys.prefix's directory out when it is one of the system ones. */
    if (prefix != NULL && strcmp(prefix, "/usr/local") != 0 && strcmp(prefix, "/") != 0 &&
        strlen(prefix) < PATH_MAX - 64)
        snprintf(candidates[n++], PATH_MAX, "%s/etc/ipython/startup", prefix);
    snprintf(candidates[n++], PATH_MAX, "%s", "/usr/local/etc/ipython/startup");
    snprintf(candidates[n++], PATH_MAX, "%s", "/etc/ipython/startup");
    for (int i = 0; i < n; i++) {
        if (has_startup_files(candidates[i]))
            memcpy(dirs[found++], candidates[i], PATH_MAX);
    }
    return found;
}

int
pyc_py_run_startup(int log_fd, pyc_error_t *err)
{
    const char *off = getenv("PYC_NO_STARTUP");
    if (off != NULL && off[0] != '\0' && strcmp(off, "0") != 0)
        return 0;
    const char *pythonstartup = getenv("PYTHONSTARTUP");
    if (pythonstartup != NULL && pythonstartup[0] == '\0')
        pythonstartup = NULL;
    json_t *env = pyc_py_environment();
    static char dirs[MAX_DIRS][PATH_MAX];
    int n = startup_dirs(json_string_value(json_object_get(env, "prefix")), dirs);
    json_decref(env);
    if (pythonstartup == NULL && n == 0)
        return 0;

    int rc = -1;
    pyc_py_enter();
    PyObject *mod = PyImport_ImportModule("pyc._startup");
    PyObject *list = PyList_New(0);
    PyObject *ps = Py_None;
    if (pythonstartup != NULL)
        ps = PyUnicode_DecodeFSDefault(pythonstartup);
    else
        Py_INCREF(ps);
    PyObject *r = NULL;
    if (mod == NULL || list == NULL || ps == NULL)
        goto out;
    for (int i = 0; i < n; i++) {
        PyObject *s = PyUnicode_DecodeFSDefault(dirs[i]);
        if (s == NULL || PyList_Append(list, s) < 0) {
            Py_XDECREF(s);
            goto out;
        }
        Py_DECREF(s);
    }
    r = PyObject_CallMethod(mod, "run", "iOO", log_fd, ps, list);
    if (r != NULL)
        rc = 0;
out:
    if (rc < 0) {
        json_t *e = pyc__py_error_content();
        pyc_error_set(err, "the start-up files could not be run: %s: %s",
                      json_string_value(json_object_get(e, "ename")), json_string_value(json_object_get(e, "evalue")));
        json_decref(e);
    }
    Py_XDECREF(r);
    Py_XDECREF(ps);
    Py_XDECREF(list);
    Py_XDECREF(mod);
    pyc_py_leave();
    return rc;
}
