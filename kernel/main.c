/*
 * main.c -- the pyc-kernel program: arguments, wiring of the modules, the main loop and exit codes.
 *
 *   pyc-kernel -f CONNECTION_FILE     run a kernel (what Jupyter starts, through kernel.json)
 *   pyc-kernel install [...]          install the kernelspec (see install.c)
 *   pyc-kernel --version | --help
 *
 * Exit codes: 0 after a shutdown request or when the parent named by JPY_PARENT_PID is gone; 1 when the
 * kernel could not start (ports, Python); 2 for bad arguments or a bad connection file.
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

#include "auth.h"
#include "config.h"
#include "connfile.h"
#include "fork.h"
#include "install.h"
#include "kernel.h"
#include "log.h"
#include "py/py.h"
#include "server.h"

static void
usage(FILE *f)
{
    fprintf(f, "usage: pyc-kernel -f CONNECTION_FILE\n"
               "       pyc-kernel install [--user | --sys-prefix | --prefix DIR] [--name NAME]\n"
               "                          [--display-name TEXT] [--env NAME=VALUE]...\n"
               "       pyc-kernel --version\n"
               "pyc %s: a Jupyter kernel for Python, written in C.\n",
               PACKAGE_VERSION);
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

static int
fork_child(void *ctx, bool outlive, json_t **info, pyc_error_t *err)
{
    return (int)pyc_fork_child(the_kernel, ctx, outlive, info, err);
}

static int
run_kernel(const char *connection_file, const char *argv0)
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
    pyc_kernel_config_t kc = {
        .io = pyc_server_io(srv),
        .auth = auth,
        .cf = &cf,
        .wake_main = wake_main,
        .wake_ctx = &srv,
        .fork_child = fork_child,
        .fork_ctx = &fenv,
        .max_children = maxc != NULL ? (int)strtol(maxc, NULL, 10) : 32,
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
    pyc_kernel_starting(k);
    if (pyc_server_start(srv, pyc_kernel_control, k, &err) < 0) {
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
    /* atexit handlers and finalizers run with output still captured and published. */
    pyc_py_enter();
    pyc_py_finalize();
    rc = 0;
    if (fenv.own_connection_file != NULL) {
        unlink(fenv.own_connection_file);    /* a forked child removes the file it wrote */
        free(fenv.own_connection_file);
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
    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--connection-file") == 0) && i + 1 < argc)
            cf = argv[++i];
        else if (strncmp(argv[i], "--connection-file=", 18) == 0)
            cf = argv[i] + 18;
        else {
            pyc_log("unknown argument '%s'", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (cf == NULL) {
        usage(stderr);
        return 2;
    }
    return run_kernel(cf, argv[0]);
}
