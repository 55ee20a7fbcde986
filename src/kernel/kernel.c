/*
 * kernel.c -- the kernel object's life cycle (see kernel.h): creation and destruction, the kernel_info
 * document, the fork of the whole process with every lock held, what a forked child changes to become a
 * kernel of its own, and the work done when idle.  The request handling lives in the files kernelint.h lists.
 */
#include "kernelint.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fork.h"
#include "log.h"
#include "units.h"

/* How often an idle kernel looks for forked sessions that ended, for those it has no pidfd of. */
#define CHILDREN_LOOK_MS 30000

pyc_kernel_t *
pyc_kernel_new(const pyc_kernel_config_t *cfg, pyc_error_t *err)
{
    pyc_kernel_t *k = calloc(1, sizeof *k);
    if (k == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    k->children.epfd = -1;
    k->io = cfg->io;
    k->auth = cfg->auth;
    k->cf = *cfg->cf;
    k->cf.key = NULL;
    k->cf.keylen = 0;
    k->wake_main = cfg->wake_main;
    k->wake_ctx = cfg->wake_ctx;
    k->fork_children = cfg->fork_children;
    k->fork_spare = cfg->fork_spare;
    k->adopt_spare = cfg->adopt_spare;
    k->tt.snapshot_take = cfg->snapshot_take;
    k->tt.snapshot_hand_over = cfg->snapshot_hand_over;
    k->tt.snapshot_drop = cfg->snapshot_drop;
    k->tt.snapshot_ctx = cfg->snapshot_ctx;
    /* Automatic snapshots before each cell (README, "Time travel"): how many are kept, and how much memory
     * they may hold together.  Bad values are logged and leave them off (or without a budget). */
    const char *v = getenv("PYC_SNAPSHOTS");
    char *end = NULL;
    long n = v != NULL && v[0] != '\0' ? strtol(v, &end, 10) : 0;
    if (v != NULL && v[0] != '\0' && (end == NULL || *end != '\0' || n < 0 || n > 1000))
        pyc_log("PYC_SNAPSHOTS=%s: not a count from 0 to 1000; automatic snapshots are off", v);
    else
        k->tt.auto_snapshots = (int)n;
    v = getenv("PYC_SNAPSHOT_MEMORY");
    size_t budget = 0;
    pyc_error_t uerr;
    if (v != NULL && v[0] != '\0' && pyc_units_bytes(v, &budget, &uerr) < 0)
        pyc_log("PYC_SNAPSHOT_MEMORY: %s; the automatic snapshots have no memory budget", uerr.text);
    k->tt.snapshot_budget = budget;
    k->fork_ctx = cfg->fork_ctx;
    k->children.max = cfg->max_children > 0 ? cfg->max_children : PYC_MAX_CHILDREN_DEFAULT;
    k->shells.max = cfg->max_subshells > 0 ? cfg->max_subshells : PYC_MAX_SUBSHELLS_DEFAULT;
    k->tt.max_snapshots = cfg->max_snapshots > 0 ? cfg->max_snapshots : PYC_MAX_SNAPSHOTS_DEFAULT;
    k->main_thread = pthread_self();
    pthread_mutex_init(&k->parent_lock, NULL);
    pyc_outgate_init(&k->out);
    pthread_mutex_init(&k->usage_lock, NULL);
    pthread_mutex_init(&k->dbg.lock, NULL);
    pthread_mutex_init(&k->shells.lock, NULL);
    pthread_mutex_init(&k->stdin_lock, NULL);
    if (cfg->limits != NULL)
        k->limits = *cfg->limits;
    else
        pyc_limits_init(&k->limits);
    pyc_outgate_set_session_caps(&k->out, k->limits.output_bytes, k->limits.output_messages);
    /* Under a memory cap, the automatic snapshots' own pages are bounded by it unless a budget is given. */
    if (k->tt.snapshot_budget == 0 && k->limits.memory > 0)
        k->tt.snapshot_budget = (unsigned long long)k->limits.memory;
    k->hard_exit = cfg->hard_exit;
    k->hard_exit_ctx = cfg->hard_exit_ctx;
    k->flush_io = cfg->flush_io;
    k->flush_io_ctx = cfg->flush_io_ctx;
    k->complete_warm_quiet_ms =
        cfg->complete_warm_quiet_ms > 0 ? cfg->complete_warm_quiet_ms : PYC_COMPLETE_WARM_QUIET_MS;
    pyc_guard_callbacks_t gcb = pyc__guard_callbacks(k);
    k->guard = pyc_guard_new(&k->limits, &gcb, err);
    if (k->guard != NULL)
        k->store.persist = pyc_persist_new(err);
    if (k->guard == NULL || k->store.persist == NULL) {
        pyc_kernel_destroy(&k);
        return NULL;
    }
    if (cfg->checkpoint_dir != NULL && cfg->session_id != NULL) {
        k->store.checkpoint_dir = strdup(cfg->checkpoint_dir);
        k->store.session_id = strdup(cfg->session_id);
        if (k->store.checkpoint_dir == NULL || k->store.session_id == NULL) {
            pyc_error_code(err, PYC_ENOMEM, "out of memory");
            pyc_kernel_destroy(&k);
            return NULL;
        }
    }
    pyc_journal_limits_t jl;
    pyc_journal_limits_from_env(&jl);
    k->journal = pyc_journal_new(&jl);   /* NULL (off) when PYC_JOURNAL_CELLS is 0, or memory ran out */
    pyc_msg_new_id(k->session);
    const char *user = getenv("USER");
    json_t *u = json_string(user != NULL && user[0] != '\0' ? user : "pyc");
    if (u == NULL)
        u = json_string("pyc");  /* USER was not valid UTF-8 */
    k->username_json = json_dumps(u, JSON_ENCODE_ANY);
    json_decref(u);
    k->streams = pyc_streams_new(pyc__stream_publish, k, err);
    if (k->username_json == NULL || k->streams == NULL || pyc__procfork_install(k, err) < 0) {
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
    pyc__procfork_forget(k);
    pyc_guard_destroy(&k->guard);
    pyc_streams_destroy(&k->streams);
    pyc_kernel_idle(k);
    pyc_persist_destroy(&k->store.persist);   /* its last batch first: it writes into the two below */
    pyc_history_close(&k->store.history);
    pyc__end_children(k);
    pyc__forget_children(k);
    pyc__snapshots_end(k);
    free(k->parent);
    free(k->username_json);
    free(atomic_load(&k->kernel_info));
    free(k->kernel_info_form);
    pyc_checkpoint_destroy(&k->store.checkpoint);
    free(k->store.checkpoint_dir);
    free(k->store.session_id);
    json_decref(k->replayed);
    pyc__lifelog_destroy(k);
    pyc__memory_reserve(k, false);
    pthread_mutex_destroy(&k->parent_lock);
    pyc_outgate_destroy(&k->out);
    pthread_mutex_destroy(&k->usage_lock);
    pyc__debugger_destroy(&k->dbg.debugger);
    pthread_mutex_destroy(&k->dbg.lock);
    pyc__end_subshells(k);
    pthread_mutex_destroy(&k->shells.lock);
    pthread_mutex_destroy(&k->stdin_lock);
    pyc_journal_free(&k->journal);
    free(k);
    *k_p = NULL;
}

pyc_streams_t *
pyc_kernel_streams(pyc_kernel_t *k)
{
    return k->streams;
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
    atomic_store(&k->subscriptions, 0);
    pyc__forget_children(k);
    /* The parent's snapshots are its own (a restored snapshot gets its table from the restorer). */
    pyc__snapshots_end(k);
    k->tt.restore_to = 0;
    k->tt.txn = false;     /* the parent's children are not ours */
    /* The parent's debugger thread does not exist here (its memory is left as it is); the control thread of
     * the parent may have held the lock at the fork. */
    pyc__debugger_forget(k->dbg.debugger);
    k->dbg.debugger = NULL;
    pthread_mutex_init(&k->dbg.lock, NULL);
    k->shells.live = k->shells.leaving = NULL;   /* their threads are the parent's */
    pthread_mutex_init(&k->shells.lock, NULL);
    pthread_mutex_init(&k->stdin_lock, NULL);
    pyc_journal_after_fork(k->journal);   /* it keeps the parent's done cells, which this session also ran */
    /* The SQLite connection must not cross fork(): forget it and start a session of our own.  The writer's
     * thread is the parent's (what it had not written yet is the parent's to write); this session has its own. */
    pyc_fork_keep_inherited(k->store.history);
    k->store.history = NULL;
    k->store.history_tried = false;
    pyc_fork_keep_inherited(k->store.persist);
    k->store.history_unkicked = 0;     /* those rows are the parent's */
    k->store.persist = pyc_persist_new(err);
    if (k->store.persist == NULL)
        return -1;
    if (pyc_guard_restart_in_child(k->guard, err) < 0)
        return -1;
    /* A forked session checkpoints on its own, starting from every cell of its parent's. */
    if (k->store.checkpoint_dir != NULL && id != NULL) {
        pyc_error_t cerr;
        char *nid = strdup(id);
        if (nid != NULL) {
            free(k->store.session_id);
            k->store.session_id = nid;
        }
        if (k->store.checkpoint != NULL &&
            pyc_checkpoint_fork(k->store.checkpoint, k->store.checkpoint_dir, id, &cerr) < 0)
            pyc_log("%s", cerr.text);
    }
    pyc_streams_abandon(&k->streams);
    k->streams = pyc_streams_new(pyc__stream_publish, k, err);
    if (k->streams == NULL)
        return -1;
    pyc_error_t cerr;
    if (pyc__crash_restart_in_child(k, &cerr) < 0)
        pyc_log("%s", cerr.text);
    return pyc_streams_capture_fds(k->streams, err);
}

void
pyc_kernel_rebind(pyc_kernel_t *k, pyc_io_t *io, pyc_auth_t *auth)
{
    k->io = io;
    k->auth = auth;
    atomic_store(&k->subscriptions, 0);
}

int
pyc_kernel_idle(pyc_kernel_t *k)
{
    int again_ms = -1;
    if (k->children.n > 0 && pyc__reap_children(k))
        again_ms = CHILDREN_LOOK_MS;
    if (pyc__fill_spares(k) > 0)
        again_ms = 0;            /* one spare a pause: the next after a look at the sockets */
    pyc__reap_subshells(k);
    pyc__history_kick(k, true);   /* the writer thread retries a locked history file by itself */
    if (k->complete_warm == 1) {
        /* After the first complete_request, in a pause of the requests: later Tabs find jedi warm (py.h). */
        long left = k->complete_warm_quiet_ms - pyc_ms_since(k->complete_warm_since);
        if (left <= 0) {
            k->complete_warm = 2;
            pyc_py_enter();
            pyc_py_complete_warm_up();
            pyc_py_leave();
        } else if (again_ms < 0 || left < again_ms) {
            again_ms = (int)left;
        }
    }
    return again_ms;
}

int
pyc_kernel_wait_fd(const pyc_kernel_t *k)
{
    return pyc__children_fd(k);
}

bool
pyc_kernel_quitting(pyc_kernel_t *k, bool *restart)
{
    if (restart != NULL)
        *restart = atomic_load(&k->restart);
    return atomic_load(&k->quit) != 0;
}

void
pyc_kernel_parent_gone(pyc_kernel_t *k)
{
    pyc__lifelog_close_reason(k, PYC__CLOSE_PARENT_GONE);
}

void
pyc_kernel_terminate(pyc_kernel_t *k)
{
    pyc__lifelog_close_reason(k, PYC__CLOSE_TERMINATED);
    pyc__quit(k);
}

void
pyc_kernel_closing(pyc_kernel_t *k)
{
    /* The closed event first: what follows (atexit handlers, finalization) may take the whole grace, and
     * the process may then end without another word. */
    pyc__lifelog_closed(k);
    pyc_guard_shutdown(k->guard);
    /* The debugger's thread takes the GIL: it ends before the interpreter does.  No new one starts after
     * (dbg.closed), since the control thread outlives this. */
    /* Threads still waiting for input() or a reply end their wait. */
    atomic_store(&k->quit, 1);
    pyc__interrupt_subshells(k);
    k->shells.threads_left = pyc__end_subshells(k);
    pthread_mutex_lock(&k->dbg.lock);
    k->dbg.closed = true;
    pyc__debugger_destroy(&k->dbg.debugger);
    pthread_mutex_unlock(&k->dbg.lock);
}

int
pyc_kernel_threads_left(const pyc_kernel_t *k)
{
    return k->shells.threads_left;
}
