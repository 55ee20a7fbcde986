/*
 * app.h -- the wiring of a kernel process: connection -> auth -> server -> kernel, the one start-up sequence
 * that both a kernel started by Jupyter (main.c) and a session forked from a live kernel (pyc.fork, through
 * fork.c) go through, so that a new channel or option is added in one place.
 *
 * Order matters: SIGINT and SIGTERM are blocked (pyc_app_bind) before any thread exists -- ZeroMQ's I/O
 * thread included -- so that every helper thread inherits the mask and signals reach only the main thread,
 * which unblocks them (pyc_app_start) once all threads run.
 */
#ifndef PYC_APP_H
#define PYC_APP_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "auth.h"
#include "connfile.h"
#include "kernel.h"
#include "server.h"

typedef struct pyc_app {
    const char *connection_file; /* borrowed: the file the kernel was started with; forked sessions' files go
                                  * next to it */
    pyc_connfile_t cf;           /* owned (its key too): the connection, with the ports actually bound */
    pyc_auth_t *auth;            /* owned */
    pyc_server_t *srv;           /* owned */
    pyc_kernel_t *kernel;        /* owned */
    pid_t watch_parent;          /* the process whose end ends this kernel: JPY_PARENT_PID, or in a forked
                                  * session its parent kernel (0: none) */
    char *own_connection_file;   /* owned: the file this kernel wrote (a forked session's, or the one made
                                  * for a registration file), removed when it ends */
    bool forked_session;         /* this process is a session forked from a live kernel */
    json_t *connection_json;     /* while a forked child becomes a session: its connection as JSON, made once
                                  * for its file, its report and its Python (each making it again wrote to
                                  * pages the child shares with its parent); NULL otherwise */
    dev_t own_dev;               /* own_connection_file as written: removed at the end only while it is the */
    ino_t own_ino;               /* same file (a restarted kernel with the same kernel_id writes a new one) */
    sigset_t saved_mask;         /* the mask before pyc_app_bind */
    int *use_fds;                /* borrowed, NULL: listening sockets bound already that pyc_app_bind serves
                                  * (a restore; see pyc_server_new_on) */
    /* pyc_app_bind and pyc_app_start, for timetravel.c, which binds and starts a restored kernel without
     * depending on this file (app.c calls timetravel.c; the two would call each other in a circle). */
    int (*bind)(struct pyc_app *a, pyc_error_t *err);
    int (*start)(struct pyc_app *a, pyc_error_t *err);
} pyc_app_t;

/* Blocks SIGINT and SIGTERM, then makes the signer and binds the five sockets of a->cf (ports 0 are chosen
 * by the system and written back into a->cf).  Returns 0, or -1 with err. */
int pyc_app_bind(pyc_app_t *a, pyc_error_t *err);

/* Starts the server's threads with the kernel's control handler, then restores the signal mask, with SIGINT
 * and SIGTERM unblocked whatever the launcher had.  Returns 0, or -1 with err. */
int pyc_app_start(pyc_app_t *a, pyc_error_t *err);

/* Removes the connection file this kernel wrote (own_connection_file), unless another process has replaced
 * it since (a restart with the same kernel_id), and forgets it.  Safe in hard_exit. */
void pyc_app_remove_own_file(pyc_app_t *a);

/* Started with a registration file (protocol 5.6): after pyc_app_bind, writes a connection file with the
 * ports bound (0600, beside the registration file: kernel-KERNEL_ID.json, removed when the kernel ends) and
 * reports them to the registration service (register.h).  Returns 0, or -1 with err. */
int pyc_app_register(pyc_app_t *a, pyc_error_t *err);

/* The kernel's fork_children callback (kernel.h): forks n sessions of their own from this kernel at once
 * (fork.c), each of which becomes a kernel on new ports with a new key through pyc_app_bind and
 * pyc_app_start. */
int pyc_app_fork_children(void *ctx, int n, const pyc_fork_opts_t *opts, json_t **reports, int *index);

/* The kernel's fork_spare and adopt_spare callbacks (kernel.h): a spare forked ahead of a request, which
 * becomes a kernel as pyc_app_fork_children's children do, and its hand-over (fork.c). */
int pyc_app_fork_spare(void *ctx, pyc_fork_spare_t *spare, char *file, size_t cap, json_t **names);
json_t *pyc_app_adopt_spare(void *ctx, pyc_fork_spare_t *spare, const pyc_fork_opts_t *opts, json_t *names);

/* The kernel's wake_main callback: makes a waiting pyc_server_next return. */
void pyc_app_wake(void *ctx);

#endif
