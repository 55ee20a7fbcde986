/*
 * kernel.h -- the kernel object: request dispatch (busy/idle, replies, execution_count, the abort queue),
 * cells and their limits, forked sessions, and the glue between the interpreter (src/py) and the channels
 * (an io: server.c in the program, a fake in tests/unit/kernel).  kernelint.h lists the files behind it.
 *
 * Two entry points, for two threads:
 *   pyc_kernel_control  runs in the control thread, never takes the GIL, and answers kernel_info,
 *                       interrupt, shutdown and usage at once, even while a cell runs;
 *   pyc_kernel_handle   runs in the main thread with the GIL released, for everything else.
 *
 * Threads of a kernel process, and what each owns:
 *   main       the main shell's Python (CPython delivers SIGINT's KeyboardInterrupt only to it); the shell
 *              socket until the first subshell (then the shell thread's), and the stdin socket (under
 *              stdin_lock); the request loop; every field of the kernel marked "main thread only" in
 *              kernelint.h; joins deleted subshells (pyc__reap_subshells).
 *   control    the control socket; answers the control-thread requests above without the GIL; creates,
 *              deletes and lists subshells; hands debug_request to the debugger thread; answers iopub
 *              subscriptions (iopub_welcome).
 *   shell      once a subshell exists (shell.c): the shell socket; routes requests to subshells or to main.
 *   subshell   one per subshell (subshell.c): its requests, its cells, with the GIL taken per request.
 *   debugger   started by the first debug_request (debugger.c): the TCP connection to debugpy's adapter;
 *              takes the GIL only for the kernel's own debugger commands.
 *   interrupter  short-lived: raises KeyboardInterrupt in subshells' cells, so that control never waits for
 *              the GIL.
 *   heartbeat  echoes on its socket (zmq_proxy); touches nothing else.
 *   flusher    the stream module's thread: drains the fd pipes and publishes output that waited 20 ms.
 *   guard      the time limits (guard.h), started only when a limit is set; calls back into execute.c.
 *   Python     threads the user's code starts: they print and display through the C stream objects.
 *   ZeroMQ     libzmq's I/O thread: sends lent buffers and gives them back (zerocopy.c), nothing else.
 * iopub messages are sent by whichever thread makes them, under the server's iopub lock.  Replies go out on
 * the channel their request came from: on shell from the main thread while it owns the socket (with one
 * exception, the guard's report of a stuck cell, sent after the guard's compare-and-swap has made sure the
 * main thread never sends again, guard.h), from any thread once the shell thread owns it (queued to it); on
 * stdin from the thread whose input() holds stdin_lock.
 *
 * Locks, in the order they are taken (a thread holding one may take only those below it):
 *   lock            guards                                        taken by
 *   the GIL         Python objects                                main, Python threads
 *   streams lock    pending stream text, the capture pipes        writers, flusher, flush before any message
 *   parent_lock     the parent header of iopub messages           publishers of streams and displays
 *   out.lock        the running cell's output counts (outgate.h)  every output message
 *   iopub lock      the iopub socket (server.c)                   every iopub message
 *   usage_lock      the CPU counters of usage_request             control thread
 *   guard lock      the deadline and the cell's state (guard.c)   main, guard; never held across a callback
 *                                                                 other than interrupt and expire
 * and, each taken without the GIL and with none of the above held:
 *   stdin_lock      the stdin socket, for one input() exchange    main, subshells (then streams, iopub lock)
 *   subshells_lock  the subshell lists (then a subshell's queue)  control, shell thread, main (reaping)
 *   dbg.lock        the debugger's creation (then its queue)      control, main at the end
 *   shell_lock      the shell socket until the shell thread       main, control (hand-over), any replier
 *                   has it (server's; the close takes it inside the iopub lock)
 * Every fork(2) of the process -- the kernel's own (pyc_kernel_fork) and user code's (os.fork,
 * multiprocessing) -- takes streams, parent_lock, out.lock and usage_lock in this order in a pthread_atfork
 * handler (kernel.c), so that a child never inherits one of them held by a thread that does not exist in it.
 * A child of user code is no kernel: its output goes to the inherited pipes, which the kernel drains into the
 * running cell, and it publishes nothing else.
 */
#ifndef PYC_KERNEL_H
#define PYC_KERNEL_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "auth.h"
#include "connfile.h"
#include "io.h"
#include "limit.h"
#include "stream.h"

typedef struct pyc_kernel pyc_kernel_t;

/* What a pyc.fork request asks of its children besides their number (children.c reads it from the comm's
 * data and checks it before anything is forked, so that a child never fails on a bad request). */
typedef struct pyc_fork_opts {
    bool outlive;                /* the children do not end with this kernel */
    pid_t watch;                 /* > 0: each child ends when this process ends, as a kernel ends with the
                                  * process JPY_PARENT_PID names, and outlives this kernel (a template's
                                  * session ends with its kernel manager, not with the template) */
    /* The children's connection where the request gives it (a template session restarted in place keeps its
     * address, key and ports, so that its clients need not reconnect): */
    bool has_ip, has_key, has_ports;
    char ip[256];
    char key[257];
    int ports[PYC_CHAN_COUNT];   /* only for one child */
    bool has_cwd;
    char cwd[4096];              /* the children's working directory (a template session starts in its
                                  * manager's) */
    int spares;                  /* -1: as before; else the spares this kernel keeps from now on (see below) */
} pyc_fork_opts_t;

/* A spare (README, "Kernels from a warm template"): a child forked ahead of any request, in a pause of this
 * kernel's requests, that has done what makes a fork slow (fork(2) itself, CPython's after-fork handlers, a
 * new ZeroMQ context, binding five ports, starting its threads) and then waits, before it reports, for the
 * request it will serve: a pyc.fork of one child that leaves the connection to the child hands it over
 * (pyc_fork_adopt) in a fraction of a millisecond.  It dies with this kernel until it is handed over, and is
 * dropped once this kernel has handled anything but pyc.fork and kernel_info, which may have changed the state
 * it was forked from.  Its pipes are the parent's: report_fd its report, adopt_fd the instructions. */
typedef struct pyc_fork_spare {
    pid_t pid;
    int report_fd;
    int adopt_fd;
    unsigned generation;         /* the parent's state it was forked from (children.c) */
} pyc_fork_spare_t;

/* The most spares a kernel keeps. */
#define PYC_MAX_SPARES 8

/* Live forked sessions allowed at once unless the config says otherwise (PYC_MAX_CHILDREN): room for a
 * fan-out of 100 (pyc.fork {"n": 100}) beside a few others.  A child of a copy-on-write session costs its
 * own pages only (about 2 MB when fresh), but each holds five ports and a few threads. */
#define PYC_MAX_CHILDREN_DEFAULT 128
/* Subshells (threads) alive at once, and snapshots taken by name (each a parked process): bounds on what a
 * client with the key, or a loop in a cell, can make the kernel hold.  Automatic snapshots have their own
 * (PYC_SNAPSHOTS). */
#define PYC_MAX_SUBSHELLS_DEFAULT 128
#define PYC_MAX_SNAPSHOTS_DEFAULT 64

typedef struct pyc_kernel_config {
    pyc_io_t *io;                /* borrowed */
    pyc_auth_t *auth;            /* borrowed */
    const pyc_connfile_t *cf;    /* borrowed; ports are those actually bound */
    void (*wake_main)(void *ctx);/* makes the main loop leave its wait, to look at pyc_kernel_quitting and run
                                  * pyc_kernel_idle */
    void *wake_ctx;
    /* Forks n child kernels at once (see fork.h, pyc_fork_children): in the parent returns 0 with *reports
     * a new JSON array of n entries, each a child's report or {"error"} for a child that did not start; in
     * a child returns 1 with *index its place among the n.  NULL disables the pyc.fork comm target. */
    int (*fork_children)(void *ctx, int n, const pyc_fork_opts_t *opts, json_t **reports, int *index);
    /* Forks a spare (fork.h, pyc_fork_spare): 0 in the parent with *spare set and file (cap bytes) the
     * connection file it writes (removed with it when it is dropped), -1 when it could not; 1 in the spare
     * once it has been handed a request, with *names that request's "names" (a new reference, or NULL).
     * adopt_spare hands spare the request opts and returns its report as fork_children's entries are. */
    int (*fork_spare)(void *ctx, pyc_fork_spare_t *spare, char *file, size_t cap, json_t **names);
    json_t *(*adopt_spare)(void *ctx, pyc_fork_spare_t *spare, const pyc_fork_opts_t *opts, json_t *names);
    void *fork_ctx;
    int max_children;            /* live children allowed at once (pyc.fork); 0: PYC_MAX_CHILDREN_DEFAULT */
    int max_subshells;           /* subshells alive at once; 0: PYC_MAX_SUBSHELLS_DEFAULT */
    int max_snapshots;           /* snapshots taken by name held at once; 0: PYC_MAX_SNAPSHOTS_DEFAULT */
    /* Snapshots (README, "Time travel"; kernel/timetravel.h): snapshot_take forks a parked snapshot: 0 in the
     * kernel with *pid, 1 in the snapshot once a restore made it the live kernel (*state the restorer's, *pid
     * its parked copy or -1), -1 with err.  snapshot_hand_over gives the ports to the snapshot `to` and does
     * not return, or returns -1 with err (the kernel serves again).  snapshot_drop ends a parked snapshot.
     * NULL disables the pyc.snapshot comm target. */
    int (*snapshot_take)(void *ctx, pid_t *pid, json_t **state, pyc_error_t *err);
    int (*snapshot_hand_over)(void *ctx, pid_t to, json_t *state, pyc_error_t *err);
    int (*snapshot_drop)(pid_t pid);
    void *snapshot_ctx;
    const pyc_limits_t *limits;  /* copied; NULL for none */
    /* Ends the process at once with `code` after sending what is queued (the guard thread calls it when a
     * cell cannot be stopped, or the shutdown grace is over).  Must not return. */
    void (*hard_exit)(void *ctx, int code);
    void *hard_exit_ctx;
    const char *checkpoint_dir;  /* where the session's checkpoint goes; NULL: no checkpoint */
    const char *session_id;      /* the checkpoint's name (the connection file's stem) */
    /* Closes the sockets after sending what is queued (up to a second): the crash reporter calls it after
     * its messages, since the process dies next and a message still queued would be lost.  May be NULL. */
    void (*flush_io)(void *ctx);
    void *flush_io_ctx;
    /* How long the kernel must have had no request before it warms the completer, after the first
     * complete_request (pyc_kernel_idle); 0: PYC_COMPLETE_WARM_QUIET_MS. */
    int complete_warm_quiet_ms;
} pyc_kernel_config_t;

/* The completer's warm-up (py.h, pyc_py_complete_warm_up) holds the main thread for up to 1.3 s, and
 * JupyterLab drops a completion answered after 1 s: it waits for a pause of this long in the requests, when
 * the user is reading or typing rather than pressing Tab (until then the standard library's completer
 * answers first, in milliseconds). */
#define PYC_COMPLETE_WARM_QUIET_MS 2000

pyc_kernel_t *pyc_kernel_new(const pyc_kernel_config_t *cfg, pyc_error_t *err);
void pyc_kernel_destroy(pyc_kernel_t **k_p);

/* The kernel's stream sink for the interpreter's host callbacks; created by pyc_kernel_new. */
pyc_streams_t *pyc_kernel_streams(pyc_kernel_t *k);

/* Fills the interpreter's host callbacks (see py.h). */
struct pyc_py_host;
void pyc_kernel_py_host(pyc_kernel_t *k, struct pyc_py_host *host);

/* Publishes status "starting" once. */
void pyc_kernel_starting(pyc_kernel_t *k);

/* Makes this kernel the session `session` of the event log in dir (events.h; README "pyc events"): it then
 * writes ready, cell_started, cell_done and closed there.  Returns 0, or -1 with err (no events then). */
int pyc_kernel_events(pyc_kernel_t *k, const char *session, const char *dir, pyc_error_t *err);

/* The kernel answers requests now: writes the ready event (when it writes events). */
void pyc_kernel_ready(pyc_kernel_t *k);

/* The main loop ends because the process named by JPY_PARENT_PID is gone: the reason of the closed event. */
void pyc_kernel_parent_gone(pyc_kernel_t *k);

/* SIGTERM came: the kernel ends as after a shutdown_request (the running cell interrupted, history and
 * checkpoint written, atexit handlers run, its files removed), with the closed event's reason "terminated".
 * Async-signal-safe (atomics, kill, an eventfd write): called from the main thread's SIGTERM handler. */
void pyc_kernel_terminate(pyc_kernel_t *k);

/* True in the kernel's process (and in its forked sessions and isolated cells), false in a child of user
 * code (os.fork, a multiprocessing worker), which must react to signals as a plain Python process does.
 * Async-signal-safe. */
bool pyc_kernel_owns_process(void);

/* Control thread: answers what needs no Python; returns false to have the request sent to the main thread.
 * Takes ownership of msg when it returns true. */
bool pyc_kernel_control(void *k, pyc_msg_t *msg);

/* Control thread: a client subscribed to iopub with topic[0..len): publishes iopub_welcome (JEP 65) with that
 * topic, no parent, and content {"subscription": topic}.  A topic that is not UTF-8 gets no welcome. */
void pyc_kernel_subscribed(void *k, const char *topic, size_t len);

/* The server's on_unsubscribe callback: one subscriber fewer (counted for restores). */
void pyc_kernel_unsubscribed(void *k);

/* Main thread, GIL released: handles one request from shell or control and destroys it. */
void pyc_kernel_handle(pyc_kernel_t *k, int chan, pyc_msg_t *msg);

/* Main thread: the kernel is about to wait for requests (none is queued): commits the history batch, reaps
 * forked sessions that ended, joins deleted subshells, and once, after the first complete_request and a
 * pause in the requests (PYC_COMPLETE_WARM_QUIET_MS), warms the completer.  Returns how long the wait may
 * last before this is called again, in ms (a history file locked by another kernel is tried again; a forked
 * session without a pidfd is looked at now and then; the pause is not over yet), or -1: until a request
 * comes, or pyc_kernel_wait_fd is readable, or wake_main is called. */
int pyc_kernel_idle(pyc_kernel_t *k);

/* Main thread: a descriptor to watch while waiting for requests, readable when pyc_kernel_idle has work (a
 * forked session ended), or -1. */
int pyc_kernel_wait_fd(const pyc_kernel_t *k);

/* A restore (README, "Time travel"), in the kernel that hands over, just before its sockets close: the shell
 * requests that came and were not handled yet, as a JSON array of their frames (hex), which the restored
 * kernel handles first (pyc_kernel_next_forwarded).  A new reference. */
json_t *pyc_kernel_take_pending(pyc_kernel_t *k);

/* In a restored kernel: first sends the answer the kernel it replaced held back (which may wait for the
 * clients to come back: a second for iopub subscribers, five for a reply's peer, at most), then returns the
 * next request that kernel forwarded (checked and decoded with the key), or NULL.  It came on shell. */
pyc_msg_t *pyc_kernel_next_forwarded(pyc_kernel_t *k);

/* The sockets were made anew after a restore failed (timetravel.c): the kernel sends through them from now on,
 * and counts their iopub subscribers from zero. */
void pyc_kernel_rebind(pyc_kernel_t *k, pyc_io_t *io, pyc_auth_t *auth);

/* fork(2) of the kernel process, from the main thread without the GIL: CPython's fork handling, with the
 * locks a child must not inherit held by another thread (streams, parent) taken across the call.  Returns
 * what fork returns; *errno_out is fork's errno. */
pid_t pyc_kernel_fork(pyc_kernel_t *k, int *errno_out);

/* In a forked child: switches the kernel to its own channels (io, auth, connection), a new session id,
 * new output pipes, its own history session, its own limits thread, and a checkpoint named id (NULL: keep
 * the name) that starts with the parent's cells.  The streams and history inherited from the parent are
 * abandoned, never used. */
int pyc_kernel_become_child(pyc_kernel_t *k, pyc_io_t *io, pyc_auth_t *auth, const pyc_connfile_t *cf,
                            const char *id, pyc_error_t *err);

/* Main thread, after the interpreter and the server threads have started: applies the memory cap (a hard
 * RLIMIT_DATA of what the process has now plus the cap).  Returns 0, or -1 with err. */
int pyc_kernel_limit_memory(pyc_kernel_t *k, pyc_error_t *err);

/* Main thread, after the server threads have started: applies the open-file cap (filecap.c: a hard
 * RLIMIT_NOFILE of the descriptors open now, PYC_FILECAP_HEADROOM, PYC_FILECAP_RESERVE and the cap).  Returns 0,
 * or -1 with err. */
#define PYC_FILECAP_HEADROOM 64
#define PYC_FILECAP_RESERVE 16
int pyc_kernel_limit_files(pyc_kernel_t *k, pyc_error_t *err);

/* Main thread, before pyc_kernel_starting: runs the cells of a checkpoint file silently, stopping at the
 * first that fails.  What happened goes into kernel_info_reply's "pyc" member and the log.  Returns 0, or
 * -1 with err when the file cannot be read or a cell failed. */
int pyc_kernel_replay(pyc_kernel_t *k, const char *path, pyc_error_t *err);

/* Main thread, after the interpreter started (GIL released): makes a fatal signal (a segfault in C code)
 * reported -- the Python traceback of every thread to the log, and an error and execute_reply to the running
 * cell's client -- before the process dies of it (crash.c).  Returns 0, or -1 with err (reports are off). */
int pyc_kernel_crash_reports(pyc_kernel_t *k, pyc_error_t *err);

/* Main thread: the request loop has ended; the shutdown grace starts now. */
void pyc_kernel_closing(pyc_kernel_t *k);

/* After pyc_kernel_closing: how many subshell threads are still running (left to the process's end).  When
 * not 0, the kernel must not be destroyed: the process ends without freeing what they may touch. */
int pyc_kernel_threads_left(const pyc_kernel_t *k);

/* True once a shutdown was asked for; *restart tells whether the client will start a new kernel. */
bool pyc_kernel_quitting(pyc_kernel_t *k, bool *restart);

#endif
