/*
 * fork.h -- session fork: a live kernel becomes N kernels, each child starting from the parent's exact
 * state (copy-on-write) and serving its own five channels.
 *
 * The child: leaves the parent's process group (an interrupt sent to the parent's group does not reach it),
 * dies with its parent unless asked to outlive it (PR_SET_PDEATHSIG), closes the parent's listening and
 * connected kernel sockets it inherited, never calls into the inherited ZeroMQ objects (their threads do
 * not exist in the child), makes a new context and binds new ports on the same IP with a new key, writes
 * a connection file (mode 0600) next to the parent's, starts its threads, and reports to the parent through
 * a pipe.  The parent returns only once the child is ready to answer, so a client may connect at once.
 */
#ifndef PYC_FORK_H
#define PYC_FORK_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "auth.h"
#include "connfile.h"
#include "error.h"
#include "kernel.h"
#include "server.h"

/* What a child needs to become a kernel, and the main loop's variables it replaces. */
typedef struct pyc_fork_env {
    const char *connection_file; /* the parent's; children's files go next to it */
    pyc_connfile_t *cf;          /* the parent's connection (transport, ip, scheme) */
    pyc_server_t **srv;          /* replaced in the child */
    pyc_auth_t **auth;           /* replaced in the child */
    pid_t *watch_parent;         /* the process whose death ends this kernel; the parent kernel in a child */
    char *own_connection_file;   /* set in a child: the file it wrote (freed by the caller) */
} pyc_fork_env_t;

/* Forks one child.  In the parent returns the child's pid and sets *info to
 * {"pid", "connection_file", "connection": {...the file's content...}}; in the child returns 0 once it is a
 * kernel of its own (the caller must then drop the request being handled without replying); returns -1
 * with err when the fork or the child's start failed.  Called on the main thread between requests, without
 * the GIL. */
pid_t pyc_fork_child(pyc_kernel_t *k, pyc_fork_env_t *env, bool outlive, json_t **info, pyc_error_t *err);

#endif
