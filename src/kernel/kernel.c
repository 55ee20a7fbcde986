/*
 * kernel.c -- the kernel object's life cycle (see kernel.h): creation and destruction, the kernel_info
 * document, the fork of the whole process with every lock held, what a forked child changes to become a
 * kernel of its own, and the work done when idle.  The request handling lives in the files kernelint.h lists.
 */
#include "kernelint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fork.h"
#include "log.h"

pyc_kernel_t *
pyc_kernel_new(const pyc_kernel_config_t *cfg, pyc_error_t *err)
{
    pyc_kernel_t *k = calloc(1, sizeof *k);
    if (k == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    k->io = cfg->io;
    k->auth = cfg->auth;
    k->cf = *cfg->cf;
    k->cf.key = NULL;
    k->cf.keylen = 0;
    k->wake_main = cfg->wake_main;
    k->wake_ctx = cfg->wake_ctx;
    k->fork_child = cfg->fork_child;
    k->fork_ctx = cfg->fork_ctx;
    k->max_children = cfg->max_children > 0 ? cfg->max_children : 32;
    k->main_thread = pthread_self();
    pthread_mutex_init(&k->parent_lock, NULL);
    pyc_outgate_init(&k->out);
    pthread_mutex_init(&k->usage_lock, NULL);
    if (cfg->limits != NULL)
        k->limits = *cfg->limits;
    else
        pyc_limits_init(&k->limits);
    k->hard_exit = cfg->hard_exit;
    k->hard_exit_ctx = cfg->hard_exit_ctx;
    pyc_guard_callbacks_t gcb = pyc__guard_callbacks(k);
    k->guard = pyc_guard_new(&k->limits, &gcb, err);
    if (k->guard == NULL) {
        pyc_kernel_destroy(&k);
        return NULL;
    }
    if (cfg->checkpoint_dir != NULL && cfg->session_id != NULL) {
        k->checkpoint_dir = strdup(cfg->checkpoint_dir);
        k->session_id = strdup(cfg->session_id);
        if (k->checkpoint_dir == NULL || k->session_id == NULL) {
            pyc_error_code(err, PYC_ENOMEM, "out of memory");
            pyc_kernel_destroy(&k);
            return NULL;
        }
    }
    pyc_msg_new_id(k->session);
    const char *user = getenv("USER");
    json_t *u = json_string(user != NULL && user[0] != '\0' ? user : "pyc");
    if (u == NULL)
        u = json_string("pyc");  /* USER was not valid UTF-8 */
    k->username_json = json_dumps(u, JSON_ENCODE_ANY);
    json_decref(u);
    k->streams = pyc_streams_new(pyc__stream_publish, k, err);
    if (k->username_json == NULL || k->streams == NULL) {
        if (k->username_json == NULL)
            pyc_error_code(err, PYC_ENOMEM, "out of memory");
        pyc_kernel_destroy(&k);
        return NULL;
    }
    return k;
}

void
pyc_kernel_destroy(pyc_kernel_t **k_p)
{
    if (k_p == NULL || *k_p == NULL)
        return;
    pyc_kernel_t *k = *k_p;
    pyc_guard_destroy(&k->guard);
    pyc_streams_destroy(&k->streams);
    pyc_kernel_idle(k);
    pyc_history_close(&k->history);
    pyc__end_children(k);
    pyc__forget_children(k);
    free(k->parent);
    free(k->username_json);
    free(k->kernel_info);
    pyc_checkpoint_destroy(&k->checkpoint);
    free(k->checkpoint_dir);
    free(k->session_id);
    json_decref(k->replayed);
    pyc__memory_reserve(k, false);
    pthread_mutex_destroy(&k->parent_lock);
    pyc_outgate_destroy(&k->out);
    pthread_mutex_destroy(&k->usage_lock);
    free(k);
    *k_p = NULL;
}

pyc_streams_t *
pyc_kernel_streams(pyc_kernel_t *k)
{
    return k->streams;
}

void
pyc_kernel_starting(pyc_kernel_t *k)
{
    char banner[256];
    snprintf(banner, sizeof banner, "Python %s (pyc %s) -- a Jupyter kernel for Python, written in C",
             pyc_py_version(), PACKAGE_VERSION);
    json_t *info = json_pack(
        "{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:i}, s:s}, s:s, s:[{s:s, s:s}], s:b}",
        "status", "ok", "protocol_version", PYC_PROTOCOL_VERSION, "implementation", "pyc",
        "implementation_version", PACKAGE_VERSION, "language_info", "name", "python", "version",
        pyc_py_version(), "mimetype", "text/x-python", "file_extension", ".py", "pygments_lexer", "ipython3",
        "codemirror_mode", "name", "ipython", "version", 3, "nbconvert_exporter", "python", "banner", banner,
        "help_links", "text", "Python Reference", "url", "https://docs.python.org/3/", "debugger", 0);
    pyc_checkpoint_t *cp = pyc__checkpoint(k);
    json_t *pyc = json_pack("{s:o, s:o}", "limits", pyc_limits_to_json(&k->limits), "checkpoint",
                            cp != NULL ? json_string(pyc_checkpoint_path(cp)) : json_null());
    if (k->replayed != NULL)
        json_object_set(pyc, "replayed", k->replayed);
    json_object_set_new(info, "pyc", pyc);
    free(k->kernel_info);        /* a forked child makes it again */
    k->kernel_info = json_dumps(info, JSON_COMPACT);
    json_decref(info);
    pyc__status(k, NULL, "starting");
}

pid_t
pyc_kernel_fork(pyc_kernel_t *k, int *errno_out)
{
    /* The GIL first, then CPython's before-fork handlers (Python code: it may print, so none of our locks
     * may be held yet), then the streams lock, the parent lock and the output cap's lock -- the order every
     * other path takes them (kernel.h) -- around the bare fork(2) only, so that the child never inherits one
     * of them taken by another thread.  The guard's lock is not taken: a forked kernel starts a guard of its
     * own (pyc_guard_restart_in_child) and an isolated cell's child never uses it. */
    pyc_py_enter();
    pyc_py_fork_prepare();
    pyc_streams_lock(k->streams);
    pthread_mutex_lock(&k->parent_lock);
    pyc_outgate_lock(&k->out);
    pid_t pid = fork();
    *errno_out = errno;
    pyc_outgate_unlock(&k->out);
    pthread_mutex_unlock(&k->parent_lock);
    pyc_streams_unlock(k->streams);
    pyc_py_fork_done(pid);
    pyc_py_leave();
    return pid;
}

int
pyc_kernel_become_child(pyc_kernel_t *k, pyc_io_t *io, pyc_auth_t *auth, const pyc_connfile_t *cf,
                        const char *id, pyc_error_t *err)
{
    k->io = io;
    k->auth = auth;
    k->cf = *cf;
    k->cf.key = NULL;
    k->cf.keylen = 0;
    pyc_msg_new_id(k->session);
    k->main_thread = pthread_self();
    atomic_store(&k->executing, 0);
    atomic_store(&k->quit, 0);
    pyc__forget_children(k);     /* the parent's children are not ours */
    /* The SQLite connection must not cross fork(): forget it and start a session of our own. */
    pyc_fork_keep_inherited(k->history);
    k->history = NULL;
    k->history_tried = false;
    k->history_batch = false;
    if (pyc_guard_restart_in_child(k->guard, err) < 0)
        return -1;
    /* A forked session checkpoints on its own, starting from every cell of its parent's. */
    if (k->checkpoint_dir != NULL && id != NULL) {
        pyc_error_t cerr;
        char *nid = strdup(id);
        if (nid != NULL) {
            free(k->session_id);
            k->session_id = nid;
        }
        if (k->checkpoint != NULL && pyc_checkpoint_fork(k->checkpoint, k->checkpoint_dir, id, &cerr) < 0)
            pyc_log("%s", cerr.text);
    }
    pyc_streams_abandon(&k->streams);
    k->streams = pyc_streams_new(pyc__stream_publish, k, err);
    if (k->streams == NULL)
        return -1;
    return pyc_streams_capture_fds(k->streams, err);
}

pyc_history_t *
pyc__history(pyc_kernel_t *k)
{
    /* Opened on first use: SQLite costs a kernel 1.2 MB of resident memory and some start-up time once a
     * database is open, which a kernel that never runs a cell should not pay. */
    if (!k->history_tried) {
        pyc_error_t herr;
        k->history_tried = true;
        k->history = pyc_history_open_default(&herr);
        if (k->history == NULL)
            pyc_log("history is off: %s", herr.text);
    }
    return k->history;
}

void
pyc_kernel_idle(pyc_kernel_t *k)
{
    if (k->n_children > 0)
        pyc__reap_children(k);
    if (k->history_batch) {
        pyc_error_t err;
        if (pyc_history_batch(k->history, false, &err) < 0)
            pyc_log("%s", err.text);
        k->history_batch = false;
    }
}

bool
pyc_kernel_quitting(pyc_kernel_t *k, bool *restart)
{
    if (restart != NULL)
        *restart = atomic_load(&k->restart);
    return atomic_load(&k->quit) != 0;
}

void
pyc_kernel_closing(pyc_kernel_t *k)
{
    pyc_guard_shutdown(k->guard);
}
