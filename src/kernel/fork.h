/*
 * fork.h -- session fork: a live kernel becomes N kernels, each child starting from the parent's exact
 * state (copy-on-write) and serving its own five channels.
 *
 * The child: leaves the parent's process group (an interrupt sent to the parent's group does not reach it),
 * dies with its parent unless asked to outlive it (PR_SET_PDEATHSIG), closes the parent's listening and
 * connected kernel sockets it inherited, never calls into the inherited ZeroMQ objects (their threads do
 * not exist in the child), makes a new context and binds new ports on the same IP with a new key, writes
 * a connection file (mode 0600) next to the parent's, starts its threads, and reports to the parent through
 * a pipe (one record.h record: the report, or the error).  The parent returns only once the children are
 * ready to answer (or known to have failed), so a client may connect at once.
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

/* How a forked child becomes a kernel of its own: the program's start-up sequence (kernel/app.c), so that a
 * forked session is wired exactly as a kernel Jupyter started. */
typedef struct pyc_fork_spec {
    const pyc_connfile_t *cf;    /* the parent's connection: its sockets are closed in the child */
    /* Runs in the child, which has left its parent's process group, will die with the parent unless
     * opts->outlive or opts->watch, and has SIGINT and SIGTERM blocked.  Binds new channels (as opts says),
     * starts the threads, and returns the report {"pid", "connection_file", "connection": {...the file's
     * content...}} (a new reference), or NULL with err. */
    json_t *(*become)(void *ctx, const pyc_fork_opts_t *opts, pid_t parent, pyc_error_t *err);
    /* In a spare handed a request: from now on it ends when watch ends (0: never), not with its parent. */
    void (*adopted)(void *ctx, pid_t watch);
    void *ctx;
} pyc_fork_spec_t;

/* Forks n children at once: the parent forks them one after another without waiting, each starts on its
 * own while the next is forked, and the parent then collects their reports in whatever order they come,
 * within 10 s for all.  In the parent returns 0 with *reports a new JSON array of n entries in the order of
 * the forks: a child's report, or {"pid", "error"} for one that failed to start or did not report in time
 * (it is then ended and reaped), or {"error"} for one that could not be forked (pipe or fork failed; no
 * more are forked after it).  In a child returns 1 once it is a kernel of its own, with *index its place
 * among the n (the caller must then drop the request being handled without replying).  Called on the main
 * thread between requests, without the GIL. */
int pyc_fork_children(pyc_kernel_t *k, const pyc_fork_spec_t *spec, int n, const pyc_fork_opts_t *opts,
                      json_t **reports, int *index);

/* Forks a spare (kernel.h): the child becomes a kernel of its own at once (spec->become, dying with this
 * process), then waits for pyc_fork_adopt.  In the parent returns 0 with *spare set (its report comes at
 * adoption), or -1 with err.  In the spare returns 1 once it has been handed a request and has reported, with
 * *names the request's "names" (a new reference, or NULL); a spare whose parent drops it (closes its pipe)
 * exits.  Main thread, between requests. */
int pyc_fork_spare(pyc_kernel_t *k, const pyc_fork_spec_t *spec, pyc_fork_spare_t *spare, json_t **names,
                   pyc_error_t *err);

/* In the parent: hands the spare a request (opts: watch, outlive, cwd; names, may be NULL) and returns its
 * report, as one of pyc_fork_children's entries ({pid, connection_file, connection} or {pid, error}, after
 * which it is ended), within 10 s.  Closes the spare's pipes. */
json_t *pyc_fork_adopt(pyc_fork_spare_t *spare, const pyc_fork_opts_t *opts, json_t *names);

/* In a forked child: closes the parent's kernel sockets it inherited (listening and connected, those whose
 * local address is one of cf's endpoints), all but the descriptor keep; otherwise the child would keep the
 * parent's ports bound (a restarted parent could not bind them again) and its clients' connections open. */
void pyc_fork_close_kernel_sockets(const pyc_connfile_t *cf, int keep);

/* A pipe (close-on-exec) for a child's report, then pyc_kernel_fork: returns what fork returns, both ends
 * open in p on either side; -1 with err (and no pipe) when either failed. */
pid_t pyc_fork_piped(pyc_kernel_t *k, int p[2], pyc_error_t *err);

/* Duplicates (close-on-exec) the five listening sockets of cf's endpoints that this process holds into
 * out[chan], for a restore to hand over.  Returns 0, or -1 with every out[chan] -1 when not all five were
 * found. */
int pyc_fork_listening_fds(const pyc_connfile_t *cf, int *out);

/* In a forked child: keeps a reference to an object inherited from the parent that the child must never
 * use or free (its threads do not exist here), so that LeakSanitizer sees it as kept on purpose. */
void pyc_fork_keep_inherited(void *p);

#endif
