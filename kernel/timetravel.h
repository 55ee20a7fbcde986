/*
 * timetravel.h -- the processes behind snapshots and restores (README, "Time travel"); timetravel.c says how
 * they work.  Every function runs on the main thread between requests, without the GIL.
 */
#ifndef PYC_TIMETRAVEL_H
#define PYC_TIMETRAVEL_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "app.h"
#include "error.h"

/* In a forked session (pyc.fork): it is a kernel of its own, the root of its own snapshots. */
void pyc_tt_forget_root(void);

/* The root process: the one Jupyter started (the keeper, after a restore), whose end ends every snapshot. */
pid_t pyc_tt_root(void);

/* Takes a snapshot: forks a parked copy of the kernel.  In the kernel returns 0 with *pid the snapshot's
 * process.  In the snapshot, once a restore made it the live kernel (serving the same ports), returns 1 with
 * *state the restorer's state (a new reference) and *pid a parked copy of itself that keeps the snapshot
 * (-1 if none could be made); the caller must then drop the request being handled without replying, since
 * the kernel that forked it answered it.  Returns -1 with err when nothing was forked. */
int pyc_tt_take(pyc_app_t *a, pid_t *pid, json_t **state, pyc_error_t *err);

/* Ends a parked snapshot.  Returns 0, or -1 when it does not answer (it is gone). */
int pyc_tt_drop(pid_t pid);

/* Hands the kernel over to the parked snapshot `to` with state (not stolen).  Does not return when it worked:
 * the root process becomes the keeper, any other ends.  Returns -1 with err when the snapshot did not take
 * over, and the kernel serves its ports again. */
int pyc_tt_hand_over(pyc_app_t *a, pid_t to, json_t *state, pyc_error_t *err);

/* The keeper's side: "\0pyc-WHAT-ROOT[-PID]" sockets of the abstract namespace.  -1 with errno on failure. */
int pyc_tt_listen(const char *what, pid_t root, pid_t pid);
int pyc_tt_connect(const char *what, pid_t root, pid_t pid);

/* True when the peer of a Unix socket runs as our user; *pid (may be NULL) is its pid. */
bool pyc_tt_peer_ok(int fd, pid_t *pid);

/* The kernel's snapshot callbacks (kernel.h): pyc_tt_take and pyc_tt_hand_over on the app (ctx). */
int pyc_app_snapshot_take(void *ctx, pid_t *pid, json_t **state, pyc_error_t *err);
int pyc_app_snapshot_hand_over(void *ctx, pid_t to, json_t *state, pyc_error_t *err);

/* `pyc-kernel --keeper PID` (timetravel.c): the process Jupyter started, once a restore moved the kernel to the
 * snapshot PID.  Returns the exit code. */
int pyc_keeper_main(pid_t active);

#endif
