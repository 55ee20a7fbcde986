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

/* ---- fork safety ----------------------------------------------------------------------------------- */

/* The kernel of this process, for the fork handlers (a process has one kernel). */
static pyc_kernel_t *fork_kernel;
/* True while pyc_kernel_fork forks (main thread only): the child is the kernel's own (an isolated cell, a
 * forked session), which sets itself up; any other fork is user code's (os.fork, multiprocessing). */
static bool kernel_forking;
/* The pid of the process that is the kernel: set when the kernel is made and in the kernel's own children.
 * A process with another pid is a child of user code.  Atomic: signal handlers read it. */
static _Atomic pid_t kernel_pid;

/* LLVM 14's AddressSanitizer does not take its own locks around fork(2) (the fork interceptor that does came
 * with LLVM 15): a fork while another thread -- libzmq's I/O thread, the stream flusher -- is inside malloc
 * left the child waiting for the allocator's lock for ever (seen with gdb: an isolated cell's child stuck in
 * the malloc of PyOS_AfterFork_Child, 1 run in 2).  In a clang AddressSanitizer build the fork handlers below
 * take the sanitizer's locks as that interceptor does, last before the fork and first after it.  Other builds
 * use glibc's malloc, which handles fork itself. */
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PYC_ASAN_FORK_LOCKS 1
#endif
#endif
#ifdef PYC_ASAN_FORK_LOCKS
/* __lsan::LockThreadRegistry() and friends: C++ functions of the sanitizer runtime, linked statically. */
void _ZN6__lsan18LockThreadRegistryEv(void);
void _ZN6__lsan20UnlockThreadRegistryEv(void);
void _ZN6__lsan13LockAllocatorEv(void);
void _ZN6__lsan15UnlockAllocatorEv(void);
void _ZN11__sanitizer17StackDepotLockAllEv(void);
void _ZN11__sanitizer19StackDepotUnlockAllEv(void);

static void
sanitizer_lock(void)
{
    _ZN6__lsan18LockThreadRegistryEv();
    _ZN6__lsan13LockAllocatorEv();
    _ZN11__sanitizer17StackDepotLockAllEv();
}

static void
sanitizer_unlock(void)
{
    _ZN11__sanitizer19StackDepotUnlockAllEv();
    _ZN6__lsan15UnlockAllocatorEv();
    _ZN6__lsan20UnlockThreadRegistryEv();
}
#else
static void
sanitizer_lock(void)
{
}

static void
sanitizer_unlock(void)
{
}
#endif

/* Before any fork(2) of this process, from whatever thread calls it: takes every lock of the kernel that
 * another thread may hold, in the order of kernel.h, so that the child inherits none of them taken by a
 * thread that does not exist in it.  (The GIL is held by the forking thread already when Python forks, and
 * by pyc_kernel_fork.)  The server's locks and the guard's belong to objects a child never uses: a forked
 * session makes its own, and a user's child leaves the kernel's sockets alone (atfork_child). */
static void
atfork_prepare(void)
{
    pyc_kernel_t *k = fork_kernel;
    if (k == NULL)
        return;
    pyc_streams_lock(k->streams);
    pthread_mutex_lock(&k->parent_lock);
    pyc_journal_lock(k->journal);        /* after parent_lock, as the send path takes them */
    pyc_outgate_lock(&k->out);
    pthread_mutex_lock(&k->usage_lock);
    pyc_persist_fork_prepare(k->persist);   /* the writer is not inside SQLite nor between buffer and file */
    sanitizer_lock();
}

/* Gives back the locks of atfork_prepare before the writer's, in reverse order. */
static void
unlock_kernel(pyc_kernel_t *k)
{
    pthread_mutex_unlock(&k->usage_lock);
    pyc_outgate_unlock(&k->out);
    pyc_journal_unlock(k->journal);
    pthread_mutex_unlock(&k->parent_lock);
    pyc_streams_unlock(k->streams);
}

static void
atfork_parent(void)
{
    pyc_kernel_t *k = fork_kernel;
    if (k == NULL)
        return;
    sanitizer_unlock();
    pyc_persist_fork_parent(k->persist);
    unlock_kernel(k);
}

/* In the child.  A child of user code (a multiprocessing worker, os.fork in a cell) is not a kernel: its
 * output goes straight to the fds it inherited, which are the pipes the kernel drains, so that it reaches
 * the cell that made the child, as under ipykernel; it publishes nothing else (the kernel's sockets are the
 * parent's, and their threads do not exist here). */
static void
atfork_child(void)
{
    pyc_kernel_t *k = fork_kernel;
    if (k == NULL)
        return;
    sanitizer_unlock();
    pyc_persist_after_fork_child(k->persist);   /* its thread is the parent's: kicks do nothing here */
    unlock_kernel(k);
    if (kernel_forking) {
        atomic_store(&kernel_pid, getpid());
        return;
    }
    k->user_forked = true;
    pyc_streams_set_passthrough(k->streams);
    /* SIGTERM kills a user's child as it kills any Python process: multiprocessing.Pool ends its workers
     * so, and the kernel's handler here would only have interrupted the worker (which then may go on
     * waiting, and its pool's join with it: seen as a soak test's hang) and woken the parent's main loop
     * through the inherited eventfd.  A SIGTERM that comes before this line is handled the same way by
     * pyc_kernel_owns_process's caller. */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGTERM, &dfl, NULL);
}

bool
pyc_kernel_owns_process(void)
{
    return getpid() == atomic_load(&kernel_pid);
}

/* Registers the fork handlers once per process; fork_kernel says which kernel they guard. */
static int
atfork_install(pyc_kernel_t *k, pyc_error_t *err)
{
    static bool installed;
    if (!installed) {
        if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child) != 0)
            return pyc_error_set(err, "pthread_atfork failed");
        installed = true;
    }
    fork_kernel = k;
    atomic_store(&kernel_pid, getpid());
    return 0;
}

pid_t
pyc_kernel_fork(pyc_kernel_t *k, int *errno_out)
{
    /* The GIL first, then CPython's before-fork handlers (Python code: it may print, so none of our locks
     * may be held yet), then fork(2), around which atfork_prepare takes the kernel's locks. */
    (void)k;
    pyc_py_enter();
    pyc_py_fork_prepare();
    kernel_forking = true;
    pid_t pid = fork();
    *errno_out = errno;
    kernel_forking = false;
    pyc_py_fork_done(pid);
    pyc_py_leave();
    return pid;
}

void
pyc__user_fork_exit(pyc_kernel_t *k)
{
    /* A child of user code that came back from the cell (os.fork() without os._exit): it must not go on as a
     * second kernel on its parent's sockets.  What it printed has reached the cell already. */
    (void)k;
    fflush(NULL);
    _exit(0);
}

pyc_kernel_t *
pyc_kernel_new(const pyc_kernel_config_t *cfg, pyc_error_t *err)
{
    pyc_kernel_t *k = calloc(1, sizeof *k);
    if (k == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    k->children_epfd = -1;
    k->io = cfg->io;
    k->auth = cfg->auth;
    k->cf = *cfg->cf;
    k->cf.key = NULL;
    k->cf.keylen = 0;
    k->wake_main = cfg->wake_main;
    k->wake_ctx = cfg->wake_ctx;
    k->fork_children = cfg->fork_children;
    k->snapshot_take = cfg->snapshot_take;
    k->snapshot_hand_over = cfg->snapshot_hand_over;
    k->snapshot_drop = cfg->snapshot_drop;
    k->snapshot_ctx = cfg->snapshot_ctx;
    /* Automatic snapshots before each cell (README, "Time travel"): how many are kept, and how much memory
     * they may hold together.  Bad values are logged and leave them off (or without a budget). */
    const char *v = getenv("PYC_SNAPSHOTS");
    char *end = NULL;
    long n = v != NULL && v[0] != '\0' ? strtol(v, &end, 10) : 0;
    if (v != NULL && v[0] != '\0' && (end == NULL || *end != '\0' || n < 0 || n > 1000))
        pyc_log("PYC_SNAPSHOTS=%s: not a count from 0 to 1000; automatic snapshots are off", v);
    else
        k->auto_snapshots = (int)n;
    v = getenv("PYC_SNAPSHOT_MEMORY");
    size_t budget = 0;
    pyc_error_t uerr;
    if (v != NULL && v[0] != '\0' && pyc_units_bytes(v, &budget, &uerr) < 0)
        pyc_log("PYC_SNAPSHOT_MEMORY: %s; the automatic snapshots have no memory budget", uerr.text);
    k->snapshot_budget = budget;
    k->fork_ctx = cfg->fork_ctx;
    k->max_children = cfg->max_children > 0 ? cfg->max_children : PYC_MAX_CHILDREN_DEFAULT;
    k->max_subshells = cfg->max_subshells > 0 ? cfg->max_subshells : PYC_MAX_SUBSHELLS_DEFAULT;
    k->max_snapshots = cfg->max_snapshots > 0 ? cfg->max_snapshots : PYC_MAX_SNAPSHOTS_DEFAULT;
    k->main_thread = pthread_self();
    pthread_mutex_init(&k->parent_lock, NULL);
    pyc_outgate_init(&k->out);
    pthread_mutex_init(&k->usage_lock, NULL);
    pthread_mutex_init(&k->debugger_lock, NULL);
    pthread_mutex_init(&k->subshells_lock, NULL);
    pthread_mutex_init(&k->stdin_lock, NULL);
    if (cfg->limits != NULL)
        k->limits = *cfg->limits;
    else
        pyc_limits_init(&k->limits);
    pyc_outgate_set_session_caps(&k->out, k->limits.output_bytes, k->limits.output_messages);
    /* Under a memory cap, the automatic snapshots' own pages are bounded by it unless a budget is given. */
    if (k->snapshot_budget == 0 && k->limits.memory > 0)
        k->snapshot_budget = (unsigned long long)k->limits.memory;
    k->hard_exit = cfg->hard_exit;
    k->hard_exit_ctx = cfg->hard_exit_ctx;
    k->flush_io = cfg->flush_io;
    k->flush_io_ctx = cfg->flush_io_ctx;
    k->complete_warm_quiet_ms =
        cfg->complete_warm_quiet_ms > 0 ? cfg->complete_warm_quiet_ms : PYC_COMPLETE_WARM_QUIET_MS;
    pyc_guard_callbacks_t gcb = pyc__guard_callbacks(k);
    k->guard = pyc_guard_new(&k->limits, &gcb, err);
    if (k->guard != NULL)
        k->persist = pyc_persist_new(err);
    if (k->guard == NULL || k->persist == NULL) {
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
    if (k->username_json == NULL || k->streams == NULL || atfork_install(k, err) < 0) {
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
    if (fork_kernel == k)
        fork_kernel = NULL;
    pyc_guard_destroy(&k->guard);
    pyc_streams_destroy(&k->streams);
    pyc_kernel_idle(k);
    pyc_persist_destroy(&k->persist);   /* its last batch first: it writes into the two below */
    pyc_history_close(&k->history);
    pyc__end_children(k);
    pyc__forget_children(k);
    pyc__snapshots_end(k);
    free(k->parent);
    free(k->username_json);
    free(k->kernel_info);
    pyc_checkpoint_destroy(&k->checkpoint);
    free(k->checkpoint_dir);
    free(k->session_id);
    json_decref(k->replayed);
    pyc__lifelog_destroy(k);
    pyc__memory_reserve(k, false);
    pthread_mutex_destroy(&k->parent_lock);
    pyc_outgate_destroy(&k->out);
    pthread_mutex_destroy(&k->usage_lock);
    pyc__debugger_destroy(&k->debugger);
    pthread_mutex_destroy(&k->debugger_lock);
    pyc__end_subshells(k);
    pthread_mutex_destroy(&k->subshells_lock);
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
        "help_links", "text", "Python Reference", "url", "https://docs.python.org/3/", "debugger",
        pyc_py_debugger_available());
    json_t *features = json_array();
    if (pyc_py_debugger_available())
        json_array_append_new(features, json_string("debugger"));
    if (k->io->route_shell != NULL)
        json_array_append_new(features, json_string("kernel subshells"));
    json_object_set_new(info, "supported_features", features);
    pyc_checkpoint_t *cp = pyc__checkpoint(k);
    json_t *pyc = json_pack("{s:o, s:o, s:o, s:o}", "limits", pyc_limits_to_json(&k->limits), "checkpoint",
                            cp != NULL ? json_string(pyc_checkpoint_path(cp)) : json_null(), "memory_enforcement",
                            pyc__memory_enforcement(k), "environment", pyc_py_environment());
    if (k->replayed != NULL)
        json_object_set(pyc, "replayed", k->replayed);
    json_object_set_new(info, "pyc", pyc);
    free(k->kernel_info);        /* a forked child makes it again */
    k->kernel_info = json_dumps(info, JSON_COMPACT);
    json_decref(info);
    pyc__status(k, NULL, "starting");
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
    k->restore_to = 0;
    k->txn = false;     /* the parent's children are not ours */
    /* The parent's debugger thread does not exist here (its memory is left as it is); the control thread of
     * the parent may have held the lock at the fork. */
    pyc__debugger_forget(k->debugger);
    k->debugger = NULL;
    pthread_mutex_init(&k->debugger_lock, NULL);
    k->subshells = k->leaving = NULL;   /* their threads are the parent's */
    pthread_mutex_init(&k->subshells_lock, NULL);
    pthread_mutex_init(&k->stdin_lock, NULL);
    pyc_journal_after_fork(k->journal);   /* it keeps the parent's done cells, which this session also ran */
    /* The SQLite connection must not cross fork(): forget it and start a session of our own.  The writer's
     * thread is the parent's (what it had not written yet is the parent's to write); this session has its own. */
    pyc_fork_keep_inherited(k->history);
    k->history = NULL;
    k->history_tried = false;
    pyc_fork_keep_inherited(k->persist);
    k->history_unkicked = 0;     /* those rows are the parent's */
    k->persist = pyc_persist_new(err);
    if (k->persist == NULL)
        return -1;
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
        else if (k->history_continue > 0 && pyc_history_continue(k->history, k->history_continue, &herr) < 0)
            pyc_log("%s", herr.text);
        pyc_persist_attach(k->persist, k->history);
    }
    return k->history;
}

int
pyc_kernel_idle(pyc_kernel_t *k)
{
    int again_ms = -1;
    if (k->n_children > 0 && pyc__reap_children(k))
        again_ms = CHILDREN_LOOK_MS;
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

void
pyc__history_kick(pyc_kernel_t *k, bool idle)
{
    if (k->history_unkicked == 0)
        return;
    if (k->history_unkicked < PYC__HISTORY_BATCH_CELLS) {
        pyc_persist_kick_lazy(k->persist);
        /* Going idle, the rows are asked for: the next requests need not ask again (a request that runs no
         * cell must not wake the writer).  Within a burst the count goes on, for the batch of 100. */
        if (idle)
            k->history_unkicked = 0;
        return;
    }
    k->history_unkicked = 0;
    pyc_persist_kick(k->persist);
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
     * (debugger_closed), since the control thread outlives this. */
    /* Threads still waiting for input() or a reply end their wait. */
    atomic_store(&k->quit, 1);
    pyc__interrupt_subshells(k);
    k->threads_left = pyc__end_subshells(k);
    pthread_mutex_lock(&k->debugger_lock);
    k->debugger_closed = true;
    pyc__debugger_destroy(&k->debugger);
    pthread_mutex_unlock(&k->debugger_lock);
}

int
pyc_kernel_threads_left(const pyc_kernel_t *k)
{
    return k->threads_left;
}
