/*
 * main.c -- the pyc-kernel program: arguments, wiring of the modules, the main loop and exit codes.
 *
 *   pyc-kernel -f CONNECTION_FILE [LIMITS] [--replay FILE] [--checkpoint-dir DIR | --no-checkpoint]
 *              [--snapshots N [--snapshot-memory SIZE]] [--python-env DIR]
 *                                     run a kernel (what Jupyter starts, through kernel.json)
 *   pyc-kernel install [...]          install the kernelspec (see install.c)
 *   pyc-kernel gateway-launch [...]   the launcher of Enterprise Gateway and gateway_provisioners, which starts
 *                                     a kernel in a pod or on a remote host (src/gateway/gateway.h)
 *   pyc-kernel --version | --help
 *   pyc-kernel --keeper PID           what the process Jupyter started becomes after a restore (timetravel.h)
 *
 * LIMITS are --idle-timeout=S --lifetime=S --shutdown-grace=S --cell-timeout=S --cell-grace=S --cell-cpu=S
 * --output-limit=BYTES --output-messages=N --memory-limit=BYTES --open-files=N (limit.h); each may also come
 * from its PYC_* environment variable, which an option overrides.  PYC_REPLAY, PYC_CHECKPOINT_DIR and PYC_CHECKPOINT=0
 * stand for the other options likewise, and PYC_SNAPSHOTS, PYC_SNAPSHOT_MEMORY for --snapshots, --snapshot-memory
 * (README, "Time travel").  IPython options a launcher appends (`--Class.trait=VALUE`, e.g.
 * nbclient's --HistoryManager.hist_file=:memory:) are taken out first: see take_traitlets_options.
 * PYC_SESSION (set by `pyc new`) names the `pyc` session this kernel is, which then writes the sessions'
 * event log beside its connection file.  --python-env DIR runs the kernel in the Python environment DIR when
 * DIR is one (install.h).
 *
 * Exit codes: 0 after a shutdown request, SIGTERM, an idle timeout, the end of the lifetime, or when the parent
 * named by JPY_PARENT_PID is gone; 1 when the kernel could not start (ports, Python); 2 for bad arguments or a bad
 * connection file; 3 when a cell could not be stopped after its deadline (the client was told first); 4 when
 * the registration service of a registration file (protocol 5.6) never acknowledged the kernel's ports.
 *
 * The wiring of the modules is app.c's, shared with sessions forked from a live kernel.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "app.h"
#include "auth.h"
#include "checkpoint.h"
#include "clock.h"
#include "config.h"
#include "connfile.h"
#include "fork.h"
#include "gateway.h"
#include "install.h"
#include "kernel.h"
#include "limit.h"
#include "log.h"
#include "pyenv.h"
#include "paths.h"
#include "pidcache.h"
#include "proc.h"
#include "py.h"
#include "server.h"
#include "timetravel.h"
#include "units.h"

static void
usage(FILE *f)
{
    fprintf(f, "usage: pyc-kernel -f CONNECTION_FILE [LIMIT OPTIONS] [--replay FILE]\n"
               "                  [--checkpoint-dir DIR | --no-checkpoint]\n"
               "                  [--snapshots N [--snapshot-memory SIZE]]   (a snapshot before each cell)\n"
               "                  [--python-env DIR]   (run in the Python environment DIR, when it is one)\n"
               "       pyc-kernel install [--user | --sys-prefix | --prefix DIR] [--name NAME]\n"
               "                          [--display-name TEXT] [--env NAME=VALUE]...\n"
               "       pyc-kernel gateway-launch --help   (a kernel in a pod or on a remote host, for\n"
               "                                         Enterprise Gateway and gateway_provisioners)\n"
               "       pyc-kernel --version\n"
               "pyc %s: a Jupyter kernel for Python, written in C.\n"
               "Limits (all off unless set; each also read from its environment variable):\n",
               PACKAGE_VERSION);
    for (const pyc_limit_desc_t *d = pyc_limit_descs; d->option != NULL; d++)
        fprintf(f, "  --%s=VALUE  (%s)  %s\n", d->option, d->env, d->help);
    fprintf(f, "Durations: 30, 1.5, 250ms, 30s, 5m, 2h.  Sizes: 4096, 512K, 100M, 2G.\n");
}

/* Takes out of argv the IPython (traitlets) options a launcher may append to the kernelspec's argv, which
 * pyc-kernel has no configuration system to read: `--Class.trait=VALUE` or `--Class.trait VALUE`.  nbclient
 * appends --HistoryManager.hist_file=:memory: to the kernel of every kernelspec named python, python2 or
 * python3 (its km.ipykernel), so a pyc installed under one of those names must start with it: that one is
 * honoured (it becomes PYC_HISTORY_FILE, which SQLite's ":memory:" fits); any other is logged and ignored.
 * A word is such an option when its name before any '=' is two or more dotted identifiers starting with a
 * capital (traitlets' class names).  Returns the new argc; the words keep their order. */
static int
take_traitlets_options(int argc, char **argv)
{
    int out = 1;
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        if (strcmp(w, "--") == 0) {
            while (i < argc)
                argv[out++] = argv[i++];
            break;
        }
        const char *name = w + 2;
        size_t len = strncmp(w, "--", 2) == 0 ? strcspn(name, "=") : 0;
        const char *dot = len > 0 ? memchr(name, '.', len) : NULL;
        bool traitlet = dot != NULL && name[0] >= 'A' && name[0] <= 'Z' && dot + 1 < name + len &&
                        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.") >= len;
        if (!traitlet) {
            argv[out++] = argv[i];
            continue;
        }
        const char *value = name[len] == '=' ? name + len + 1 : NULL;
        if (value == NULL && i + 1 < argc && argv[i + 1][0] != '-')
            value = argv[++i];
        if (len == strlen("HistoryManager.hist_file") && strncmp(name, "HistoryManager.hist_file", len) == 0 &&
            value != NULL && value[0] != '\0')
            setenv("PYC_HISTORY_FILE", value, 1);
        else
            pyc_log("ignoring the IPython option --%.*s (pyc-kernel has no traitlets configuration)", (int)len,
                    name);
    }
    argv[out] = NULL;
    return out;
}

/* The process whose end ends this kernel (JPY_PARENT_PID, or a forked session's parent kernel): its pidfd,
 * which the main loop's wait watches beside the sockets, so that an idle kernel learns of the end without
 * waking for it.  Where pidfd_open fails (Linux before 5.3), the wait is cut every PARENT_LOOK_MS to ask
 * kill(2) instead. */
typedef struct parent_watch {
    pid_t pid;                   /* 0: none */
    int fd;                      /* its pidfd, or -1 */
    bool gone;                   /* it had ended before it could be watched */
} parent_watch_t;

#define PARENT_LOOK_MS 30000

/* Watches pid from now on (a forked session's parent changes at the fork). */
static void
watch_parent(parent_watch_t *w, pid_t pid)
{
    if (w->fd >= 0)
        close(w->fd);
    w->pid = pid;
    w->fd = pid > 1 ? pyc_proc_pidfd(pid) : -1;
    w->gone = pid > 1 && w->fd < 0 && errno == ESRCH;
    if (pid > 1 && w->fd < 0 && !w->gone)
        pyc_log("cannot watch the parent process %ld with a pidfd (%s); looking every %d s instead", (long)pid,
                strerror(errno), PARENT_LOOK_MS / 1000);
}

/* True when the watched process no longer exists. */
static bool
parent_gone(const parent_watch_t *w)
{
    if (w->pid <= 1 || w->gone)
        return w->gone;
    if (w->fd >= 0) {
        struct pollfd p = {.fd = w->fd, .events = POLLIN};
        return poll(&p, 1, 0) > 0;
    }
    return kill(w->pid, 0) < 0 && errno == ESRCH;
}

/* The process's wiring; a forked session changes it in place (app.c). */
static pyc_app_t app;

/* SIGTERM ends the kernel as a shutdown_request does (pyc_kernel_terminate), instead of killing it with
 * history unwritten and atexit handlers not run.  Only the main thread receives it: app.c blocks it in every
 * other thread. */
static void
on_sigterm(int sig)
{
    int saved = errno;
    if (!pyc_kernel_owns_process()) {
        /* A child of user code that got the signal between its fork and its fork handler's reset: the
         * default action, as in a plain Python (the signal is blocked in here and comes again on return). */
        signal(sig, SIG_DFL);
        raise(sig);
    } else if (app.kernel != NULL) {
        pyc_kernel_terminate(app.kernel);
    }
    errno = saved;
}

/* A positive count from the environment variable `name` (at most 1,000,000), or 0 (the kernel's default) when
 * it is unset; anything else is logged and taken as unset. */
static int
env_count(const char *name)
{
    const char *v = getenv(name);
    size_t n = 0;
    pyc_error_t e;
    if (v == NULL || v[0] == '\0')
        return 0;
    if (pyc_units_count(v, 1000000, &n, &e) < 0) {
        pyc_log("%s: %s; the default is kept", name, e.text);
        return 0;
    }
    if (n == 0)
        pyc_log("%s: 0 is no bound this kernel takes; the default is kept", name);
    return (int)n;
}

static int
min_timeout(int a, int b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* Waits for the next request while nothing else is due, and returns it; returns NULL when the main loop has
 * something else to do: again_ms (pyc_kernel_idle's answer, -1: no limit) passed, the parent or a forked
 * session ended, wake_main was called, or a signal came.  Nothing wakes an idle kernel otherwise: no timer
 * runs.  Once user code has made the kernel's asyncio loop, the loop gets its turns here: its selector is
 * watched beside the sockets and its next timer bounds the wait, so tasks and callbacks run between requests
 * without polling, and a request is taken as soon as it comes. */
static pyc_msg_t *
wait_idle(pyc_server_t *srv, pyc_kernel_t *k, const parent_watch_t *w, int again_ms, int *chan)
{
    if (w->gone)
        return NULL;
    if (w->pid > 1 && w->fd < 0)
        again_ms = min_timeout(again_ms, PARENT_LOOK_MS);
    double deadline = again_ms >= 0 ? pyc_now_s() + again_ms / 1000.0 : 0;
    for (;;) {
        pyc_server_fd_t fds[3];
        int n = 0, left = -1;
        if (deadline > 0 && (left = (int)((deadline - pyc_now_s()) * 1000)) < 0)
            left = 0;
        if (w->fd >= 0)
            fds[n++] = (pyc_server_fd_t){.fd = w->fd};
        int cfd = pyc_kernel_wait_fd(k);
        if (cfd >= 0)
            fds[n++] = (pyc_server_fd_t){.fd = cfd};
        int afd = -1, due = -1;
        bool work = false;
        if (pyc_py_async_active()) {
            pyc_py_enter();
            work = pyc_py_async_pending(&afd, &due);
            pyc_py_leave();
        }
        int ai = work && afd >= 0 ? n : -1;
        if (ai >= 0)
            fds[n++] = (pyc_server_fd_t){.fd = afd};
        bool timer_first = work && due >= 0 && (left < 0 || due < left);
        double t0 = pyc_now_s();
        pyc_msg_t *msg = pyc_server_next_fds(srv, timer_first ? due : left, fds, n, chan);
        if (msg != NULL || !work)
            return msg;
        bool other = false;
        for (int i = 0; i < n; i++)
            other = other || (i != ai && fds[i].ready);
        bool timer_due = timer_first && (pyc_now_s() - t0) * 1000 >= due;
        if (other || !((ai >= 0 && fds[ai].ready) || timer_due))
            return NULL;
        pyc_py_enter();
        pyc_py_async_step();
        pyc_py_leave();
    }
}

/* The guard's hard exit (a cell stuck in C, an overdue shutdown): sends what is queued, removes a forked
 * session's own connection file, and ends the process at once. */
static void
hard_exit(void *ctx, int code)
{
    pyc_app_t *a = ctx;
    pyc_server_close(a->srv);                /* gives queued replies up to a second to leave */
    pyc_app_remove_own_file(a);
    pyc_log("exiting with status %d", code);
    _exit(code);
}

/* The crash reporter's flush (kernel.h): the sockets close, which gives queued messages their second. */
static void
flush_io(void *ctx)
{
    pyc_app_t *a = ctx;
    pyc_server_close(a->srv);
}

/* PYC_SESSION (set by `pyc new`): this kernel is that session, and writes the sessions' event log in the
 * directory of its connection file, the runtime dir (README, "pyc events").  The variable is removed, so
 * that a kernel started from inside the session (nbconvert in a cell) does not take the name too. */
static void
join_event_log(pyc_kernel_t *k, const char *connection_file)
{
    const char *name = getenv("PYC_SESSION");
    if (name == NULL || name[0] == '\0')
        return;
    char dir[4096], session[128];
    pyc_error_t err;
    snprintf(dir, sizeof dir, "%s", connection_file);
    snprintf(session, sizeof session, "%s", name);
    unsetenv("PYC_SESSION");
    if (pyc_kernel_events(k, session, dirname(dir), &err) < 0)
        pyc_log("%s; this session writes no events", err.text);
}

/* The options of run_kernel beyond the connection file. */
typedef struct run_opts {
    pyc_limits_t limits;
    const char *replay;
    const char *checkpoint_dir;  /* NULL: the default */
    bool no_checkpoint;
} run_opts_t;

/* The checkpoint's name: the connection file's name without its directory and ".json". */
static void
session_id_of(const char *connection_file, char *out, size_t cap)
{
    const char *slash = strrchr(connection_file, '/');
    snprintf(out, cap, "%s", slash != NULL ? slash + 1 : connection_file);
    size_t n = strlen(out);
    if (n > 5 && strcmp(out + n - 5, ".json") == 0)
        out[n - 5] = '\0';
}

/* PYC_PYTHON_EXE names the Python environment to run in (pyenv.h).  One of another version is refused: the
 * kernel ends with the reason on stderr (which jupyter shows), before any Python starts.  One of the right
 * version puts its bin/ first on PATH, so that !pip, !python and subprocesses agree with the kernel.  A path
 * that is no environment at all (an interpreter of a system installation) is used as sys.executable alone,
 * as before.  Returns 0 or -1 (logged). */
static int
enter_environment(const char *exe)
{
    pyc_pyenv_t env;
    pyc_error_t err;
    if (pyc_pyenv_read(exe, &env, &err) < 0)
        return 0;
    if (pyc_pyenv_check(&env, PYC_PYTHON_VERSION, &err) < 0) {
        pyc_log("PYC_PYTHON_EXE: %s", err.text);
        return -1;
    }
    const char *path = getenv("PATH");
    char bin[PATH_MAX + 8], *np = NULL;
    snprintf(bin, sizeof bin, "%s/bin", env.prefix);
    size_t bl = strlen(bin);
    bool first = path != NULL && strncmp(path, bin, bl) == 0 && (path[bl] == ':' || path[bl] == '\0');
    const char *sep = path != NULL && path[0] != '\0' ? ":" : "";
    if (!first && asprintf(&np, "%s%s%s", bin, sep, path != NULL ? path : "") > 0) {
        setenv("PATH", np, 1);
        free(np);
    }
    if (env.venv && getenv("VIRTUAL_ENV") == NULL)
        setenv("VIRTUAL_ENV", env.prefix, 1);
    return 0;
}

/* Runs a kernel on connection_file until it is asked to shut down; returns the exit code.  *forked is set
 * when this process ends as a session forked from it. */
static int
run_kernel(const char *connection_file, const char *argv0, const run_opts_t *ro, bool *forked)
{
    pyc_error_t err;
    int rc = 1;

    app.connection_file = connection_file;
    app.bind = pyc_app_bind;
    app.start = pyc_app_start;
    if (pyc_connfile_load(connection_file, &app.cf, &err) < 0) {
        pyc_log("%s: %s", connection_file, err.text);
        return 2;
    }
    /* The allow-list of a kernelspec's env joins the connection file's.  Without CURVE keys it is refused
     * rather than ignored. */
    const char *allow = getenv("PYC_CURVE_ALLOWED_CLIENTS");
    if (allow != NULL && allow[0] != '\0') {
        if (!pyc_connfile_curve(&app.cf)) {
            pyc_log("%s: PYC_CURVE_ALLOWED_CLIENTS is set, but the connection file has no CURVE keys "
                    "(curve_publickey, curve_secretkey): refused (ignoring it would let in every client it is "
                    "meant to keep out)", connection_file);
            pyc_connfile_clear(&app.cf);
            return 2;
        }
        if (pyc_connfile_load_allowed(&app.cf, allow, &err) < 0) {
            pyc_log("PYC_CURVE_ALLOWED_CLIENTS: %s", err.text);
            pyc_connfile_clear(&app.cf);
            return 2;
        }
    }
    const char *range = getenv("PYC_PORT_RANGE");
    if (range != NULL && range[0] != '\0' && pyc_connfile_set_port_range(&app.cf, range, &err) < 0) {
        pyc_log("PYC_PORT_RANGE: %s", err.text);
        pyc_connfile_clear(&app.cf);
        return 2;
    }
    if (pyc_app_bind(&app, &err) < 0) {
        /* A connection file that cannot be used is exit 2, like bad arguments; sockets that cannot be bound,
         * exit 1. */
        pyc_log("%s: %s", app.auth == NULL ? connection_file : "cannot bind", err.text);
        rc = app.auth == NULL ? 2 : 1;
        goto out;
    }
    /* A registration file: the ports just bound go to the launcher, whose ACK must come (exit 4 if not). */
    if (app.cf.registration && pyc_app_register(&app, &err) < 0) {
        pyc_log("%s", err.text);
        rc = 4;
        goto out;
    }
    const char *pp = getenv("JPY_PARENT_PID");
    app.watch_parent = pp != NULL ? (pid_t)strtol(pp, NULL, 10) : 0;
    const char *maxc = getenv("PYC_MAX_CHILDREN");
    char sid[512], cdir[4096], data[4000];
    session_id_of(connection_file, sid, sizeof sid);
    bool checkpoints = !ro->no_checkpoint;
    if (ro->checkpoint_dir != NULL)
        snprintf(cdir, sizeof cdir, "%s", ro->checkpoint_dir);
    else if (pyc_jupyter_data_dir(data, sizeof data) == 0)
        snprintf(cdir, sizeof cdir, "%s/pyc/checkpoints", data);
    else
        checkpoints = false;
    pyc_kernel_config_t kc = {
        .io = pyc_server_io(app.srv),
        .auth = app.auth,
        .cf = &app.cf,
        .wake_main = pyc_app_wake,
        .wake_ctx = &app,
        .fork_children = pyc_app_fork_children,
        .fork_spare = pyc_app_fork_spare,
        .adopt_spare = pyc_app_adopt_spare,
        .fork_ctx = &app,
        .snapshot_take = pyc_app_snapshot_take,
        .snapshot_hand_over = pyc_app_snapshot_hand_over,
        .snapshot_drop = pyc_tt_drop,
        .snapshot_ctx = &app,
        .max_children = maxc != NULL ? (int)strtol(maxc, NULL, 10) : 0,
        .max_subshells = env_count("PYC_MAX_SUBSHELLS"),
        .max_snapshots = env_count("PYC_MAX_SNAPSHOTS"),
        .limits = &ro->limits,
        .hard_exit = hard_exit,
        .hard_exit_ctx = &app,
        .checkpoint_dir = checkpoints ? cdir : NULL,
        .session_id = sid,
        .flush_io = flush_io,
        .flush_io_ctx = &app,
    };
    app.kernel = pyc_kernel_new(&kc, &err);
    if (app.kernel == NULL) {
        pyc_log("%s", err.text);
        goto out;
    }
    join_event_log(app.kernel, connection_file);
    struct sigaction term = {.sa_handler = on_sigterm};
    sigemptyset(&term.sa_mask);
    sigaction(SIGTERM, &term, NULL);
    pyc_py_host_t host;
    pyc_kernel_py_host(app.kernel, &host);
    const char *exe = getenv("PYC_PYTHON_EXE");
    if (exe != NULL && exe[0] != '\0' && enter_environment(exe) < 0) {
        rc = 2;                  /* like a bad connection file: nothing will make this start work */
        goto out;
    }
    pyc_py_config_t pc = {
        .program_name = argv0,
        .python_exe = exe != NULL && exe[0] != '\0' ? exe : PYC_PYTHON_EXE,
        .python_files = pyc_python_files,
    };
    if (pyc_py_init(&pc, &host, &err) < 0) {
        pyc_log("%s", err.text);
        goto out;
    }
    if (pyc_kernel_crash_reports(app.kernel, &err) < 0)
        pyc_log("%s", err.text);
    /* C code's printf goes to a pipe now; line buffering makes it appear as it is printed.  Output capture
     * starts only now, so that an interpreter that fails to start can still say why on the real stderr. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pyc_streams_capture_fds(pyc_kernel_streams(app.kernel), &err) < 0)
        pyc_log("output capture is off: %s", err.text);
    /* IPython's start-up files, before replayed cells (they configure what the cells run in).  What C code
     * writes to the captured descriptors meanwhile has no request to go to and is dropped; what Python
     * prints goes to the log (pyc/_startup.py). */
    pyc_streams_flush(pyc_kernel_streams(app.kernel));
    pyc_streams_set_discard(pyc_kernel_streams(app.kernel), true);
    if (pyc_py_run_startup(pyc_log_fd(), &err) < 0)
        pyc_log("%s", err.text);
    pyc_streams_flush(pyc_kernel_streams(app.kernel));
    pyc_streams_set_discard(pyc_kernel_streams(app.kernel), false);
    if (ro->replay != NULL && pyc_kernel_replay(app.kernel, ro->replay, &err) < 0)
        pyc_log("%s", err.text);
    pyc_kernel_starting(app.kernel);
    if (pyc_app_start(&app, &err) < 0 || pyc_kernel_limit_memory(app.kernel, &err) < 0 ||
        pyc_kernel_limit_files(app.kernel, &err) < 0) {
        pyc_log("%s", err.text);
        goto out;
    }
    pyc_kernel_ready(app.kernel);
    /* From here on a request allocates and frees the same few blocks over and over; without these glibc
     * returns the top of the heap to the system after each burst and faults it back in on the next
     * (measured: 3% of a pipelined run in page faults and trims).  Stream messages are 1 MiB blocks; from the
     * heap they are reused, from mmap every one is faulted in and zeroed anew (measured: 10% of the CPU of a
     * 300 MB print).  Not before now: the start-up's large passing blocks (the interpreter's, modules being
     * loaded) then came from the heap and stayed there, 1.5 MB of the kernel's resident memory after start. */
    malloc_trim(0);
    mallopt(M_TRIM_THRESHOLD, 8 << 20);
    mallopt(M_TOP_PAD, 1 << 20);
    mallopt(M_MMAP_THRESHOLD, 4 << 20);

    bool restart = false;
    parent_watch_t parent = {.pid = 0, .fd = -1, .gone = false};
    while (!pyc_kernel_quitting(app.kernel, &restart)) {
        int chan;
        if (parent.pid != app.watch_parent)
            watch_parent(&parent, app.watch_parent);
        /* After a restore: the requests the replaced kernel got during the hand-over come first. */
        pyc_msg_t *msg = pyc_kernel_next_forwarded(app.kernel);
        chan = PYC_CHAN_SHELL;
        if (msg == NULL)
            msg = pyc_server_next(app.srv, 0, &chan);
        if (msg == NULL) {
            /* Nothing queued: deferred work first, then the wait. */
            int again_ms = pyc_kernel_idle(app.kernel);
            msg = wait_idle(app.srv, app.kernel, &parent, again_ms, &chan);
        }
        if (msg != NULL) {
            pyc_kernel_handle(app.kernel, chan, msg);
            continue;
        }
        if (parent_gone(&parent)) {
            pyc_log("parent process %ld is gone; exiting", (long)parent.pid);
            pyc_kernel_parent_gone(app.kernel);
            break;
        }
    }
    if (parent.fd >= 0)
        close(parent.fd);
    /* atexit handlers and finalizers run with output still captured and published, within the grace. */
    pyc_kernel_closing(app.kernel);
    pyc_py_enter();
    /* A forked session ends with _exit, as a forked child does: it keeps of the interpreter's finalization
     * what a user sees (threads joined, atexit, the namespace let go, streams flushed) and skips the
     * teardown of every module, which is most of a restart's time (120 ms with numpy and pandas). */
    if (app.forked_session)
        pyc_py_finish();
    else
        pyc_py_finalize();
    rc = 0;
    if (pyc_kernel_threads_left(app.kernel) > 0) {
        /* A subshell thread still runs (a cell blocked in C): it may touch the kernel and the sockets, so they
         * are not freed; queued replies get their second, and the process ends. */
        pyc_server_close(app.srv);
        pyc_app_remove_own_file(&app);
        fflush(NULL);
        _exit(rc);
    }
out:
    pyc_app_remove_own_file(&app);
    *forked = app.forked_session;
    /* The server's threads (control, shell) end before the kernel object they call into goes. */
    pyc_server_close(app.srv);
    pyc_kernel_destroy(&app.kernel);
    pyc_server_destroy(&app.srv);
    pyc_auth_destroy(&app.auth);
    pyc_connfile_clear(&app.cf);
    return rc;
}

int
main(int argc, char **argv)
{
    /* Before any thread or fork: the fork handler that keeps libzmq's cached pid true (src/kernel/pidcache.c). */
    pyc_pidcache_init();
    pyc_log_init();
    if (argc == 3 && strcmp(argv[1], "--keeper") == 0)
        return pyc_keeper_main((pid_t)strtol(argv[2], NULL, 10));   /* after a restore: timetravel.h */
    if (argc >= 2 && strcmp(argv[1], "install") == 0)
        return pyc_install_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "gateway-launch") == 0) {
        /* The kernel it starts is this program, by the path of its file: argv[0] may be a bare name. */
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
            snprintf(self, sizeof self, "%s", argv[0]);
        else
            self[n] = '\0';
        return pyc_gateway_main(argc - 1, argv + 1, self);
    }
    if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("pyc-kernel %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    argc = take_traitlets_options(argc, argv);
    const char *cf = NULL;
    run_opts_t ro = {0};
    pyc_error_t err;
    pyc_limits_init(&ro.limits);
    if (pyc_limits_from_env(&ro.limits, &err) < 0) {
        pyc_log("%s", err.text);
        return 2;
    }
    const char *e = getenv("PYC_REPLAY");
    ro.replay = e != NULL && e[0] != '\0' ? e : NULL;
    e = getenv("PYC_CHECKPOINT_DIR");
    ro.checkpoint_dir = e != NULL && e[0] != '\0' ? e : NULL;
    e = getenv("PYC_CHECKPOINT");
    ro.no_checkpoint = e != NULL && (strcmp(e, "0") == 0 || strcmp(e, "off") == 0 || strcmp(e, "no") == 0);
    /* The fixed options, then one per limit (limit.h's table). */
    enum { OPT_CF, OPT_REPLAY, OPT_CHECKPOINT_DIR, OPT_NO_CHECKPOINT, OPT_SNAPSHOTS, OPT_SNAPSHOT_MEMORY,
           OPT_PYTHON_ENV, OPT_LIMITS };
    pyc_argspec_t specs[OPT_LIMITS + 16] = {
        {"connection-file", true, 'f'},
        {"replay", true, 0},
        {"checkpoint-dir", true, 0},
        {"no-checkpoint", false, 0},
        {"snapshots", true, 0},
        {"snapshot-memory", true, 0},
        {"python-env", true, 0},
    };
    const char *python_env = NULL;
    int nspecs = OPT_LIMITS, cap = (int)(sizeof specs / sizeof specs[0]);
    for (const pyc_limit_desc_t *d = pyc_limit_descs; d->option != NULL && nspecs < cap; d++)
        specs[nspecs++] = (pyc_argspec_t){d->option, true, 0};
    pyc_argiter_t it;
    pyc_args_begin(&it, argc - 1, argv + 1, specs, nspecs);
    for (;;) {
        const char *v;
        int k = pyc_args_next(&it, &v, &err);
        if (k == PYC_ARG_END)
            break;
        if (k == PYC_ARG_HELP) {
            usage(stdout);
            return 0;
        }
        if (k == PYC_ARG_ERROR || k == PYC_ARG_POSITIONAL) {
            if (k == PYC_ARG_ERROR)
                pyc_log("%s", err.text);
            else
                pyc_log("unknown argument '%s'", v);
            usage(stderr);
            return 2;
        }
        switch (k) {
        case OPT_CF:
            cf = v;
            break;
        case OPT_REPLAY:
            ro.replay = v;
            break;
        case OPT_CHECKPOINT_DIR:
            ro.checkpoint_dir = v;
            break;
        case OPT_NO_CHECKPOINT:
            ro.no_checkpoint = true;
            break;
        case OPT_SNAPSHOTS:          /* the kernel reads them with their variables (snapshot.c checks them) */
            setenv("PYC_SNAPSHOTS", v, 1);
            break;
        case OPT_SNAPSHOT_MEMORY:
            setenv("PYC_SNAPSHOT_MEMORY", v, 1);
            break;
        case OPT_PYTHON_ENV:
            python_env = v;
            break;
        default:
            if (pyc_limits_set(&ro.limits, specs[k].name, v, &err) < 0) {
                pyc_log("%s", err.text);
                return 2;
            }
        }
    }
    if (cf == NULL) {
        usage(stderr);
        return 2;
    }
    if (python_env != NULL && pyc_install_python_env(python_env, &err) < 0) {
        pyc_log("--python-env: %s", err.text);
        return 2;                /* like a bad PYC_PYTHON_EXE: nothing will make this start work */
    }
    /* Under a memory cap, each thread's malloc arena would reserve 64 MB of the address space it counts. */
    if (ro.limits.memory > 0)
        mallopt(M_ARENA_MAX, 2);
    bool forked = false;
    int rc = run_kernel(cf, argv[0], &ro, &forked);
    if (forked) {
        /* A forked session ends without exit(3)'s handlers.  Memory it inherited from its parent is still
         * referenced from the parent's threads (ZeroMQ's I/O threads, the control thread), which do not
         * exist here, so LeakSanitizer's check at exit would report it as leaked; the parent, which frees
         * everything it allocated, is the one leak-checked.  Everything of ours is closed already. */
        fflush(NULL);
        _exit(rc);
    }
    return rc;
}
