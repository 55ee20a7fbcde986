/*
 * main.c -- the pyc-kernel program: arguments, wiring of the modules, the main loop and exit codes.
 *
 *   pyc-kernel -f CONNECTION_FILE [LIMITS] [--replay FILE] [--checkpoint-dir DIR | --no-checkpoint]
 *                                     run a kernel (what Jupyter starts, through kernel.json)
 *   pyc-kernel install [...]          install the kernelspec (see install.c)
 *   pyc-kernel --version | --help
 *
 * LIMITS are --idle-timeout=S --lifetime=S --shutdown-grace=S --cell-timeout=S --cell-grace=S
 * --output-limit=BYTES --output-messages=N --memory-limit=BYTES (limit.h); each may also come from its
 * PYC_* environment variable, which an option overrides.  PYC_REPLAY, PYC_CHECKPOINT_DIR and PYC_CHECKPOINT=0
 * stand for the other options likewise.
 *
 * Exit codes: 0 after a shutdown request, an idle timeout, the end of the lifetime, or when the parent named
 * by JPY_PARENT_PID is gone; 1 when the kernel could not start (ports, Python); 2 for bad arguments or a bad
 * connection file; 3 when a cell could not be stopped after its deadline (the client was told first).
 *
 * Order of start-up matters: SIGINT and SIGTERM are blocked before any thread exists (ZeroMQ's I/O threads
 * included), so that every helper thread inherits the mask and signals reach only the main thread, which
 * unblocks them once all threads run.  Output capture starts after Python is up, so that an interpreter
 * that fails to start can still say why on the real stderr.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "auth.h"
#include "checkpoint.h"
#include "config.h"
#include "connfile.h"
#include "fork.h"
#include "install.h"
#include "kernel.h"
#include "limit.h"
#include "log.h"
#include "paths.h"
#include "py.h"
#include "server.h"

static void
usage(FILE *f)
{
    fprintf(f, "usage: pyc-kernel -f CONNECTION_FILE [LIMIT OPTIONS] [--replay FILE]\n"
               "                  [--checkpoint-dir DIR | --no-checkpoint]\n"
               "       pyc-kernel install [--user | --sys-prefix | --prefix DIR] [--name NAME]\n"
               "                          [--display-name TEXT] [--env NAME=VALUE]...\n"
               "       pyc-kernel --version\n"
               "pyc %s: a Jupyter kernel for Python, written in C.\n"
               "Limits (all off unless set; each also read from its environment variable):\n",
               PACKAGE_VERSION);
    for (const pyc_limit_desc_t *d = pyc_limit_descs; d->option != NULL; d++)
        fprintf(f, "  --%s=VALUE  (%s)  %s\n", d->option, d->env, d->help);
    fprintf(f, "Durations: 30, 1.5, 250ms, 30s, 5m, 2h.  Sizes: 4096, 512K, 100M, 2G.\n");
}

/* ctx is the main loop's server variable, which a forked child replaces. */
static void
wake_main(void *ctx)
{
    pyc_server_wake(*(pyc_server_t **)ctx);
}

/* True when JPY_PARENT_PID names a process that no longer exists. */
static bool
parent_gone(pid_t parent)
{
    return parent > 1 && kill(parent, 0) < 0 && errno == ESRCH;
}

static pyc_kernel_t *the_kernel;

/* This process is a kernel forked by pyc.fork (set in the child when it has taken over). */
static bool forked_session;

/* What a hard exit needs: the server (to send what is queued) and a forked child's own connection file. */
static struct {
    pyc_server_t **srv;
    pyc_fork_env_t *fenv;
} hard;

static void
hard_exit(void *ctx, int code)
{
    (void)ctx;
    pyc_server_close(*hard.srv);             /* gives queued replies up to a second to leave */
    if (hard.fenv->own_connection_file != NULL)
        unlink(hard.fenv->own_connection_file);
    pyc_log("exiting with status %d", code);
    _exit(code);
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

static int
fork_child(void *ctx, bool outlive, json_t **info, pyc_error_t *err)
{
    return (int)pyc_fork_child(the_kernel, ctx, outlive, info, err);
}

static int
run_kernel(const char *connection_file, const char *argv0, const run_opts_t *ro)
{
    pyc_connfile_t cf;
    pyc_error_t err;
    pyc_auth_t *auth = NULL;
    pyc_server_t *srv = NULL;
    pyc_kernel_t *k = NULL;
    int rc = 1;

    if (pyc_connfile_load(connection_file, &cf, &err) < 0) {
        pyc_log("%s: %s", connection_file, err.text);
        return 2;
    }
    auth = pyc_auth_new(cf.signature_scheme, cf.key, cf.keylen, 0, &err);
    if (auth == NULL) {
        pyc_log("connection file %s: %s", connection_file, err.text);
        pyc_connfile_clear(&cf);
        return 2;
    }

    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);

    srv = pyc_server_new(&cf, auth, &err);
    if (srv == NULL) {
        pyc_log("%s", err.text);
        goto out;
    }
    const char *pp = getenv("JPY_PARENT_PID");
    pid_t parent = pp != NULL ? (pid_t)strtol(pp, NULL, 10) : 0;
    pyc_fork_env_t fenv = {
        .connection_file = connection_file,
        .cf = &cf,
        .srv = &srv,
        .auth = &auth,
        .watch_parent = &parent,
    };
    const char *maxc = getenv("PYC_MAX_CHILDREN");
    hard.srv = &srv;
    hard.fenv = &fenv;
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
        .io = pyc_server_io(srv),
        .auth = auth,
        .cf = &cf,
        .wake_main = wake_main,
        .wake_ctx = &srv,
        .fork_child = fork_child,
        .fork_ctx = &fenv,
        .max_children = maxc != NULL ? (int)strtol(maxc, NULL, 10) : 32,
        .limits = &ro->limits,
        .hard_exit = hard_exit,
        .checkpoint_dir = checkpoints ? cdir : NULL,
        .session_id = sid,
    };
    k = pyc_kernel_new(&kc, &err);
    the_kernel = k;
    if (k == NULL) {
        pyc_log("%s", err.text);
        goto out;
    }
    pyc_py_host_t host;
    pyc_kernel_py_host(k, &host);
    const char *exe = getenv("PYC_PYTHON_EXE");
    pyc_py_config_t pc = {
        .program_name = argv0,
        .python_exe = exe != NULL && exe[0] != '\0' ? exe : PYC_PYTHON_EXE,
        .python_files = pyc_python_files,
    };
    if (pyc_py_init(&pc, &host, &err) < 0) {
        pyc_log("%s", err.text);
        goto out;
    }
    /* C code's printf goes to a pipe now; line buffering makes it appear as it is printed. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pyc_streams_capture_fds(pyc_kernel_streams(k), &err) < 0)
        pyc_log("output capture is off: %s", err.text);
    if (ro->replay != NULL && pyc_kernel_replay(k, ro->replay, &err) < 0)
        pyc_log("%s", err.text);
    pyc_kernel_starting(k);
    if (pyc_server_start(srv, pyc_kernel_control, k, &err) < 0) {
        pyc_log("%s", err.text);
        goto out;
    }
    if (pyc_kernel_limit_memory(k, &err) < 0) {
        pyc_log("%s", err.text);
        goto out;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_sigmask(SIG_UNBLOCK, &block, NULL);

    bool restart = false;
    while (!pyc_kernel_quitting(k, &restart)) {
        int chan;
        pyc_msg_t *msg = pyc_server_next(srv, 0, &chan);
        if (msg == NULL) {
            pyc_kernel_idle(k);  /* nothing queued: finish deferred work before waiting */
            msg = pyc_server_next(srv, 1000, &chan);
        }
        if (msg != NULL) {
            pyc_kernel_handle(k, chan, msg);
            continue;
        }
        pyc_kernel_idle(k);      /* a second passed: reap children, commit history */
        if (parent_gone(parent)) {
            pyc_log("parent process %ld is gone; exiting", (long)parent);
            break;
        }
    }
    /* atexit handlers and finalizers run with output still captured and published, within the grace. */
    pyc_kernel_closing(k);
    pyc_py_enter();
    pyc_py_finalize();
    rc = 0;
    if (fenv.own_connection_file != NULL) {
        unlink(fenv.own_connection_file);    /* a forked child removes the file it wrote */
        free(fenv.own_connection_file);
        forked_session = true;
    }
out:
    pyc_kernel_destroy(&k);
    pyc_server_destroy(&srv);
    pyc_auth_destroy(&auth);
    pyc_connfile_clear(&cf);
    return rc;
}

int
main(int argc, char **argv)
{
    /* A request allocates and frees the same few blocks over and over; without these glibc returns the
     * top of the heap to the system after each burst and faults it back in on the next (measured: 3% of a
     * pipelined run in page faults and trims). */
    mallopt(M_TRIM_THRESHOLD, 8 << 20);
    mallopt(M_TOP_PAD, 1 << 20);
    /* Stream messages are 1 MiB blocks; from the heap they are reused, from mmap every one is faulted in
     * and zeroed anew (measured: 10% of the CPU of a 300 MB print). */
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    pyc_log_init();
    if (argc >= 2 && strcmp(argv[1], "install") == 0)
        return pyc_install_main(argc - 1, argv + 1);
    if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("pyc-kernel %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
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
    enum { OPT_CF, OPT_REPLAY, OPT_CHECKPOINT_DIR, OPT_NO_CHECKPOINT, OPT_LIMITS };
    pyc_argspec_t specs[OPT_LIMITS + 16] = {
        {"connection-file", true, 'f'},
        {"replay", true, 0},
        {"checkpoint-dir", true, 0},
        {"no-checkpoint", false, 0},
    };
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
    /* Under a memory cap, each thread's malloc arena would reserve 64 MB of the address space it counts. */
    if (ro.limits.memory > 0)
        mallopt(M_ARENA_MAX, 2);
    int rc = run_kernel(cf, argv[0], &ro);
    if (forked_session) {
        /* A forked session ends without exit(3)'s handlers.  Memory it inherited from its parent is still
         * referenced from the parent's threads (ZeroMQ's I/O threads, the control thread), which do not
         * exist here, so LeakSanitizer's check at exit would report it as leaked; the parent, which frees
         * everything it allocated, is the one leak-checked.  Everything of ours is closed already. */
        fflush(NULL);
        _exit(rc);
    }
    return rc;
}
