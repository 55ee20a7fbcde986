/*
 * kernelint.h -- what the files of the kernel object share among themselves (never included outside
 * src/kernel/): the struct, the running cell, and the pyc__ functions each file offers the others.
 *
 * The files, by concern (kernel.h has the threads and locks they rely on):
 *   kernel.c    life cycle, the kernel_info document, the fork of the whole kernel, idle work
 *   dispatch.c  the handler table, busy/idle around every request, the abort queue
 *   publish.c   the only code that builds, signs and sends messages; parent tracking; reply builders
 *   host.c      the interpreter's callbacks: streams, displays and input() over stdin
 *   execute.c   execute_request, the one run_cell (execute and replay), checkpoints, the guard's callbacks
 *   isolate.c   fork-isolated cells and their record protocol
 *   children.c  the table of forked sessions and the pyc.fork comm target
 *   handlers.c  every other request: kernel_info, complete, inspect, is_complete, comms, history, connect,
 *               shutdown, interrupt, usage
 *   memcap.c    the memory cap (RLIMIT_DATA) and the reserve kept for the kernel's own C work
 *   debugger.c  debug_request: the debugger's thread, relaying DAP to debugpy's adapter
 *   dap.c       the DAP stream's framing (a parser, fuzzed)
 *   subshell.c  kernel subshells: their threads, the routing of shell requests to them
 *   lifelog.c   the kernel's lines in the event log of pyc sessions (events.h): ready, cells, closed
 */
#ifndef PYC_KERNELINT_H
#define PYC_KERNELINT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "checkpoint.h"
#include "clock.h"
#include "events.h"
#include "execreq.h"
#include "guard.h"
#include "history.h"
#include "journal.h"
#include "kernel.h"
#include "limit.h"
#include "msg.h"
#include "outcome.h"
#include "outgate.h"
#include "persist.h"
#include "py.h"
#include "usage.h"

typedef struct pyc__debugger pyc__debugger_t;

/* Why the kernel ends, for its closed event (lifelog.c); the first cause set stands. */
enum {
    PYC__CLOSE_NONE,             /* none set: a shutdown */
    PYC__CLOSE_SHUTDOWN,
    PYC__CLOSE_REPLACED,         /* a shutdown_request of `pyc new --replace` */
    PYC__CLOSE_IDLE,
    PYC__CLOSE_LIFETIME,
    PYC__CLOSE_PARENT_GONE,
    PYC__CLOSE_STUCK,            /* a cell that could not be stopped after its deadline */
    PYC__CLOSE_OUT_OF_MEMORY,    /* a cell past the memory cap that could not be stopped */
    PYC__CLOSE_TERMINATED,       /* SIGTERM (a pod deleted, a service manager, jupyter_client's last resort) */
};
typedef struct pyc__subshell pyc__subshell_t;

/* A snapshot of this kernel (snapshot.c): a parked fork. */
typedef struct pyc__snapshot {
    char *name;                  /* owned */
    pid_t pid;
    int execution_count;         /* the cells it holds */
    double taken;                /* seconds since the epoch */
    bool automatic;
    json_t *not_carried;         /* owned: sentences naming what it does not hold (threads, connections, GPU) */
} pyc__snapshot_t;

/* A forked session: its pid, its connection file (removed when it ends), whether it outlives us, and the
 * pidfd that tells when it ends (-1 where pidfd_open failed). */
typedef struct pyc__child {
    pid_t pid;
    char *file;                  /* owned */
    bool outlive;
    int pidfd;                   /* owned; in children_epfd */
} pyc__child_t;

/* The cell being run.  Written by the main thread before pyc_guard_cell_begin takes the guard's lock and
 * read by the guard thread only after it (the stuck-cell report), so the lock orders them. */
typedef struct pyc__cell {
    int chan;                    /* the channel its request came on */
    int count;                   /* its execution_count */
    bool silent;
    bool isolated;               /* it runs in a forked child (isolate.c) */
    double timeout;              /* its deadline in seconds; 0: none */
    double cpu;                  /* the CPU seconds it may spend; 0: no limit */
    pyc_cellclock_t clock;
} pyc__cell_t;

/* The debugger (debugger.c; kernel.c makes the lock and ends the debugger): made by the control thread at the
 * first debug_request. */
typedef struct pyc__dbg {
    pthread_mutex_t lock;        /* guards debugger and closed */
    pyc__debugger_t *debugger;   /* owned; NULL until the first debug_request */
    bool closed;                 /* the kernel is closing: no debugger starts any more */
} pyc__dbg_t;

/* The kernel's stores (storage.c; kernel.c makes and ends them; execute.c counts the rows it queues and
 * checkpoints cells): the history and its writer, the session's checkpoint.  Main thread. */
typedef struct pyc__store {
    pyc_history_t *history;      /* owned; opened on first use (pyc__history); NULL when it could not be */
    bool history_tried;
    int history_continue;        /* the history session to write on (a restored kernel's), 0: a new one */
    pyc_persist_t *persist;      /* owned: the thread that commits the history (persist.h) */
    int history_unkicked;        /* rows queued since the writer was last kicked now (pyc__history_kick) */
    pyc_checkpoint_t *checkpoint;/* owned; made on first use (pyc__checkpoint); NULL when off */
    char *checkpoint_dir;        /* owned; NULL when checkpoints are off */
    char *session_id;            /* owned: the checkpoint's name */
    bool checkpoint_failed;      /* logged once */
} pyc__store_t;

/* The event log (lifelog.c; kernel.c frees it): set up by pyc_kernel_events before the first request (and
 * again in a forked session, by its main thread), then only written through; NULL when this kernel writes
 * none. */
typedef struct pyc__lifelog {
    pyc_events_t *events;        /* owned */
    char *session;               /* owned: the session's name */
    bool failed;                 /* a failed write was logged */
    atomic_int close_why;        /* PYC__CLOSE_*: the first cause of the end */
    atomic_int closed_written;   /* the closed event went out (once per process) */
} pyc__lifelog_t;

/* The subshells (subshell.c, and control.c, which interrupts their cells; kernel.c sets them up). */
typedef struct pyc__shells {
    pthread_mutex_t lock;        /* guards live and closed (control and shell threads) */
    pyc__subshell_t *live;       /* owned: the live subshells, newest first */
    pyc__subshell_t *leaving;    /* owned: deleted subshells whose threads the main thread has yet to join */
    int threads_left;            /* subshell threads still running after the kernel's end (pyc_kernel_closing) */
    atomic_bool closed;          /* the kernel is closing: no subshell starts any more */
    int max;                     /* alive at once (PYC_MAX_SUBSHELLS) */
} pyc__shells_t;

/* The forked sessions (children.c; kernel.c sets them up and ends them). */
typedef struct pyc__children {
    pyc__child_t *list;          /* owned: live forked sessions, reaped when idle */
    int n;
    int epfd;                    /* owned: an epoll set of the children's pidfds (-1 until the first) */
    int max;                     /* alive at once (PYC_MAX_CHILDREN) */
    /* Spares (kernel.h): forked in pauses up to want, each also in list (reaped, and ended with us, as any
     * child until it is handed over); generation counts the requests that may have changed the state. */
    pyc_fork_spare_t spares[PYC_MAX_SPARES];
    int nspares, want_spares;
    atomic_uint generation;      /* bumped by the main, subshell and control threads */
} pyc__children_t;

/* Time travel: the snapshots, restores, transactions and the hand-over of a restore (snapshot.c and
 * handover.c; kernel.c sets it up and ends it).  Main thread, but for snaps as its comment says. */
typedef struct pyc__tt {
    /* The program's (kernel.h's pyc_kernel_config_t): NULL take when snapshots are off. */
    int (*snapshot_take)(void *ctx, pid_t *pid, json_t **state, pyc_error_t *err);
    int (*snapshot_hand_over)(void *ctx, pid_t to, json_t *state, pyc_error_t *err);
    int (*snapshot_drop)(pid_t pid);
    void *snapshot_ctx;
    int max_snapshots;
    pyc__snapshot_t *snaps;      /* owned: the snapshots this kernel may restore, oldest first (snapshot.c);
                                  * changed by the main thread under usage_lock, which usage_request reads it
                                  * under */
    int n_snaps;
    int snap_seq;                /* numbers the snapshots taken without a name */
    int restore_to;              /* 1 + the entry to restore once the request being handled ends; 0 */
    pid_t restore_pid;           /* its process, which finds it again then (entries may have moved) */
    char *restore_error;         /* owned: why the last restore failed, for the list; NULL */
    json_t *restored;            /* owned: which snapshot this kernel was restored from, and when; NULL */
    int await_subscribers;       /* after a restore: the subscribers the replaced kernel had, which requests */
    double await_until;          /* wait for (pyc_now_s() clock) until they are back or this time is past */
    double return_until;         /* after a restore: until when a held reply waits for its client's return */
    bool holding;                /* a restore follows: the main thread's messages wait in held (handover.c) */
    json_t *held;                /* owned: the answer held back, [{"chan", "frames" (hex)}], or NULL */
    int auto_snapshots;          /* automatic snapshots before each cell kept at most (PYC_SNAPSHOTS; 0: off) */
    unsigned long long snapshot_budget; /* bytes the automatic ones may hold together (PYC_SNAPSHOT_MEMORY) */
    bool txn;                    /* the cell being run is a transaction, whose snapshot is txn_name */
    char txn_name[256];
    bool restore_drop;           /* the snapshot being restored is used up (a transaction's): no copy kept */
    char *take_after;            /* owned: the name of a snapshot to take once the request is answered; NULL */
    json_t *forwarded;           /* owned: shell requests the replaced kernel got during a restore, as frames */
    double forward_after;        /* pyc_now_s() time before which they are not answered */
} pyc__tt_t;

struct pyc_kernel {
    /* Set at creation (and again in a forked child); read by every thread. */
    pyc_io_t *io;                /* borrowed */
    pyc_auth_t *auth;            /* borrowed */
    pyc_connfile_t cf;           /* a copy without the key (key NULL): ports for connect_reply */
    void (*wake_main)(void *ctx);
    void *wake_ctx;
    char session[PYC_MSG_ID_LEN + 1];
    char *username_json;         /* owned: the JSON-encoded username of every header */
    pyc_streams_t *streams;      /* owned */
    pthread_t main_thread;
    int (*fork_children)(void *ctx, int n, const pyc_fork_opts_t *opts, json_t **reports, int *index);
    int (*fork_spare)(void *ctx, pyc_fork_spare_t *spare, char *file, size_t cap, json_t **names);
    json_t *(*adopt_spare)(void *ctx, pyc_fork_spare_t *spare, const pyc_fork_opts_t *opts, json_t *names);
    void *fork_ctx;
    pyc_limits_t limits;
    void (*hard_exit)(void *ctx, int code);
    void *hard_exit_ctx;
    void (*flush_io)(void *ctx); /* may be NULL */
    void *flush_io_ctx;

    /* Any thread, under parent_lock: the parent of iopub messages that have no request of their own. */
    pthread_mutex_t parent_lock;
    char *parent;                /* owned: the header frame of the request being handled */
    size_t parent_len;

    /* Main thread only. */
    int execution_count;
    bool aborting;               /* after an error with stop_on_error: abort queued execute requests */
    pyc_msg_t **queued;          /* owned: the requests that were waiting when the error happened */
    size_t n_queued;
    const pyc_msg_t *current;    /* borrowed: the request being handled (also read by the guard thread) */
    bool allow_stdin;
    /* owned: the kernel_info_reply content, made by pyc_kernel_starting.  Atomic: a forked child's control
     * thread may answer kernel_info while the child fills its own in (kernelinfo.c). */
    char *_Atomic kernel_info;
    char *kernel_info_form;      /* owned: the same with the checkpoint's value left out (kernelinfo.c) */
    size_t kernel_info_gap;      /* where in kernel_info_form the checkpoint's value goes */
    int complete_warm;           /* 0: no complete_request yet, 1: the completer to warm when idle, 2: done */
    uint64_t complete_warm_since;/* pyc_now_ns of the last request while complete_warm is 1 */
    int complete_warm_quiet_ms;  /* the pause in the requests the warm-up waits for */
    bool just_forked;            /* this process is a child that has not finished the fork request */
    bool flushed_at_end;         /* the handler published the output streams after the last user code it
                                  * ran (execute): the flush before idle is not needed */
    bool user_forked;            /* this process is a child of user code (os.fork): not a kernel */
    pyc__cell_t cell;
    void *mem_reserve;           /* address space kept back for the kernel's own C work under a memory cap */
    json_t *replayed;            /* owned: what --replay did, for kernel_info; NULL when nothing was */

    /* Shared between threads, each guarded as its comment says. */
    atomic_int executing;        /* a cell runs: interrupts go to the main thread */
    atomic_int quit;
    atomic_int restart;
    pyc_guard_t *guard;          /* owned: the time limits' thread; thread-safe */
    atomic_int iso_pid;          /* the running isolated cell's process, 0 when none */
    atomic_int iso_stop;         /* why the kernel killed it: 0 not, ISO_STOP_INTERRUPT or ISO_STOP_DEADLINE */
    atomic_int memory_interrupts;/* the memory watch's interrupts of the running cell */
    atomic_int subscriptions;    /* live iopub subscriptions (the control thread counts them) */
    pyc_outgate_t out;           /* the running cell's output cap; its own lock */
    pthread_mutex_t usage_lock;  /* guards usage (control thread and any other) */
    pyc_usage_state_t usage;
    pthread_mutex_t stdin_lock;  /* held through one input() exchange: one at a time on the stdin channel */
    pyc_journal_t *journal;      /* owned: recent cells for journal_request; its own lock; NULL when off */
    atomic_ullong last_output_ns; /* pyc_now_ns when the last output (pyc_outgate_counts) was sent on iopub */


    /* Each feature's own state, read and written by the files named in its type's comment only (others go
     * through their functions; tests/check-style.sh keeps the rule). */
    pyc__store_t store;
    pyc__lifelog_t lifelog;
    pyc__shells_t shells;
    pyc__children_t children;
    pyc__tt_t tt;
    pyc__dbg_t dbg;
};

/* Why an isolated cell's process was killed by the kernel (iso_stop). */
enum { ISO_STOP_INTERRUPT = 1, ISO_STOP_DEADLINE = 2 };

/* ---- publish.c ------------------------------------------------------------------------------------------ */

/* The pace of an execute_reply after output (pyc__pace_reply): REPLY_PACE_BASE_US, and PYC_REPLY_PACE_US
 * microseconds (default REPLY_PACE_US; 0 turns pacing off) per iopub message the cell caused, counting at
 * most REPLY_PACE_MAX_MSGS of them (3.5 ms in all by default), from the cell's last output (the relay gets
 * its messages from the first one on, and has forwarded them all at the latest that long after the last). */
#define REPLY_PACE_BASE_US 500
#define REPLY_PACE_US 300
#define REPLY_PACE_MAX_US 20000      /* the most PYC_REPLY_PACE_US may say */
#define REPLY_PACE_MAX_MSGS 10
#define REPLY_PACE_MAX_BYTES (64u << 10)

/* Before the execute_reply of a cell that published n_outputs outputs, the last at last_ns (pyc_now_ns):
 * waits until a relay has had time to forward them.  jupyter_server (and the gateways) read a kernel's iopub and
 * shell on separate streams and take one message from a stream per turn of their loop, so a reply that comes
 * with the cell's outputs is forwarded before most of them, and a client that ends a block at the reply
 * (OpenHands does) loses them.  No kernel-side sign tells a relayed request from a direct one (jupyter_server
 * gives its connection the client's own session as identity), so the pace applies to every cell that had
 * output and ended quickly; a cell without output, or whose outputs are older than the pace, waits for
 * nothing, and so does one with more than REPLY_PACE_MAX_BYTES of output: a relay cannot forward that within
 * any pace worth its cost (jupyter_server's rate limit drops much of it), and the pace is for a block's few
 * small outputs.  A client that reads iopub to the idle anyway (pyc's own) asks for no pace with metadata
 * {"pyc": {"pace": false}} (pyc_execreq_t.pace). */
void pyc__pace_reply(uint64_t last_ns, size_t n_outputs, size_t output_bytes);

/* The header frame of a received message: the frame after the signature. */
const pyc_frame_t *pyc__header_frame(const pyc_msg_t *msg);

/* Builds, signs and sends one message.  content is taken over when content_owned is true (it must then be a
 * malloc'd block); buffers[0..nbuf) are taken over in every case as pyc_io_t.send takes frames.  Returns 0 or
 * -1; the message is lost on -1 (out of memory, or the channel closed), with a log line.  Any thread. */
int pyc__send_frames(pyc_kernel_t *k, int chan, const pyc_frame_t *idents, size_t n_idents, const char *msg_type,
                     const void *parent, size_t parent_len, const char *metadata, char *content, size_t content_len,
                     bool content_owned, pyc_outframe_t *buffers, size_t nbuf);

/* pyc__send_frames, and the new message's msg_id into msg_id_out (PYC_MSG_ID_LEN + 1 bytes; may be NULL),
 * when the header could be made (whenever it returns 0, and also when only the send failed). */
int pyc__send_frames_id(pyc_kernel_t *k, int chan, const pyc_frame_t *idents, size_t n_idents, const char *msg_type,
                        const void *parent, size_t parent_len, const char *metadata, char *content,
                        size_t content_len, bool content_owned, pyc_outframe_t *buffers, size_t nbuf,
                        char *msg_id_out);

/* The reply type of a request: "X_reply" for "X_request" (the part before the last '_', at most 100 bytes of
 * it, then "_reply"), into out (at least 128 bytes). */
void pyc__reply_type(const char *msg_type, char *out, size_t cap);

/* Replies to a request on the channel it came from; metadata (may be NULL) and content are stolen. */
int pyc__reply(pyc_kernel_t *k, int chan, const pyc_msg_t *req, const char *msg_type, json_t *metadata,
               json_t *content);

/* Publishes on iopub with req as the parent; content is stolen. */
int pyc__publish(pyc_kernel_t *k, const pyc_msg_t *req, const char *msg_type, json_t *content);

/* pyc__reply and pyc__publish for contents already written as JSON text (the hot path's fixed shapes):
 * content (content_len bytes, a malloc'd block) is taken over in every case; metadata is JSON text (copied,
 * may be NULL for {}). */
int pyc__reply_text(pyc_kernel_t *k, int chan, const pyc_msg_t *req, const char *msg_type, const char *metadata,
                    char *content, size_t content_len);
int pyc__publish_text(pyc_kernel_t *k, const pyc_msg_t *req, const char *msg_type, char *content,
                      size_t content_len);

/* Publishes with the current parent (pyc__set_parent): content text (taken over) and metadata (copied, may
 * be NULL), and buffers taken over as pyc__send_frames takes them.  Any thread. */
void pyc__publish_current(pyc_kernel_t *k, const char *msg_type, char *text, size_t len, const char *metadata,
                          pyc_outframe_t *buffers, size_t nbuf);

/* Publishes status execution_state with parent req (NULL: none, for "starting"). */
void pyc__status(pyc_kernel_t *k, const pyc_msg_t *req, const char *state);

/* Makes msg the parent of iopub messages that have no request of their own (streams, displays), after
 * publishing what earlier requests left pending. */
void pyc__set_parent(pyc_kernel_t *k, const pyc_msg_t *msg);

/* The metadata of a reply: {"started", "dependencies_met", "status"}.  A new reference. */
json_t *pyc__reply_metadata(const char *status);

/* The same members as text, appended to b as an object left open, so that the caller can add members
 * (",\"pyc\":...") before its closing brace.  Returns 0, or -1 (b's cap or memory) with b in an unspecified
 * state. */
int pyc__reply_metadata_open(pyc_buf_t *b, const char *status);

/* The content of an execute_reply for a cell that failed: error's ename, evalue and traceback with status
 * "error", the execution_count, user_expressions and payload (each borrowed, NULL for empty).  The one builder
 * of the three ways a cell fails (an error of its own, a bad request, a stuck cell).  A new reference. */
json_t *pyc__execute_error_content(json_t *error, int count, json_t *user_expressions, json_t *payload);

/* The content of a reply to a request that lacks what it must have: status error, ename BadRequest. */
json_t *pyc__bad_request(const char *what);

/* Answers a request with status "aborted" (after an earlier error with stop_on_error). */
void pyc__abort_reply(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);

/* A signed request that could not be read (msg->invalid: bad JSON or UTF-8 in its content, say): an error
 * reply of its own type, so that its client is not left waiting.  Needs no Python. */
void pyc__reply_invalid(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);

/* ---- host.c --------------------------------------------------------------------------------------------- */

/* The streams' publish callback (stream.h): stream text of the current parent, through the output cap. */
void pyc__stream_publish(void *ctx, int which, const char *text, size_t n);

/* ---- execute.c ------------------------------------------------------------------------------------------ */

/* An execute_request on the main shell, decoded once by dispatch (req: its decoding, refusal included). */
void pyc__on_execute(pyc_kernel_t *k, int chan, const pyc_msg_t *msg, const pyc_execreq_t *req);

/* Publishes a cell's error within what the output cap of gate (the main shell's, &k->out, or a subshell's)
 * leaves (pyc_outcome_error_within), counted by that gate, its last line kept in the gate's head; nothing when
 * the message cap is spent or not even the error's name fits (the reply carries it in any case).  error is
 * not changed. */
void pyc__publish_error_within_cap(pyc_kernel_t *k, pyc_outgate_t *gate, const pyc_msg_t *msg, json_t *error);

/* The guard's callbacks for this kernel (they run on the guard thread). */
pyc_guard_callbacks_t pyc__guard_callbacks(pyc_kernel_t *k);

/* ---- isolate.c ------------------------------------------------------------------------------------------ */

/* Runs a cell in a forked child (see isolate.c).  Fills res like pyc_py_execute, and *md_out with what
 * happened (merged into metadata.pyc of the reply, with its "outcome"). */
void pyc__run_isolated(pyc_kernel_t *k, const char *code, const pyc_py_exec_opts_t *opts, pyc_py_exec_result_t *res,
                       json_t **md_out);

/* ---- children.c ----------------------------------------------------------------------------------------- */

/* Reaps the forked sessions that ended and removes their connection files.  Returns true when a child is
 * left that has no pidfd, whose end only a later look can find. */
bool pyc__reap_children(pyc_kernel_t *k);

/* A descriptor that is readable once a forked session has ended (the epoll set of their pidfds), or -1 when
 * no child is watched that way. */
int pyc__children_fd(const pyc_kernel_t *k);

/* The kernel is ending: children not asked to outlive it end now, and their connection files go.  Safe on
 * the guard thread (signals and unlink only). */
void pyc__end_children(pyc_kernel_t *k);

/* Forgets every child (a forked child: its parent's children are not its own), closing their pidfds and the
 * spares' pipes. */
void pyc__forget_children(pyc_kernel_t *k);

/* In a pause of the requests: drops the spares forked from a state that has changed since, and forks one
 * more when fewer than wanted are ready.  Returns 1 when it forked one (more may be wanted: call again soon),
 * else 0.  In a spare that has been handed a request it returns 0 too, the process then being that session. */
int pyc__fill_spares(pyc_kernel_t *k);

/* A request other than pyc.fork and kernel_info may change the state the spares were forked from (any
 * thread). */
void pyc__state_may_change(pyc_kernel_t *k);

/* Sentences naming what a fork of the kernel made now does not carry (threads other than the main one, open
 * network connections other than the kernel's own, GPU contexts: pyc._timetravel.losses), as a JSON array
 * (a new reference; [] when it carries everything or Python cannot tell).  into names the copy ("the
 * snapshot", "the forked sessions"), gpu_after when the GPU must not be used ("after a restore"). */
json_t *pyc__not_carried(pyc_kernel_t *k, const char *into, const char *gpu_after);

/* The comm target pyc.fork. */
void pyc__on_fork(pyc_kernel_t *k, const pyc_msg_t *msg);

/* snapshot.c: the comm target pyc.snapshot, the table, restores. */
void pyc__on_snapshot(pyc_kernel_t *k, const pyc_msg_t *msg);
json_t *pyc__snapshot_list(pyc_kernel_t *k);
int pyc__snapshot_drop(pyc_kernel_t *k, const char *name);
/* Takes a snapshot named name (NULL: a name is made).  0 with *answer its record; 1 in the snapshot once it
 * was restored (it has taken the restorer's state: the caller drops the request); -1 with err. */
int pyc__snapshot_take(pyc_kernel_t *k, const char *name, bool automatic, json_t **answer, pyc_error_t *err);
/* Asks for a restore of the snapshot name ("-N": the Nth newest) once the current request is answered. */
int pyc__snapshot_request_restore(pyc_kernel_t *k, const char *name, pyc_error_t *err);
/* Restores what was asked for, if anything: does not return when the restore worked. */
void pyc__snapshot_restore_now(pyc_kernel_t *k);

/* handover.c: what crosses a restore's hand-over.
 *
 * Whether a message about to be sent is part of the answer to a request that asked for a restore, which the
 * restored kernel sends once the clients are back: on the main thread, from the request's reply on shell or
 * its status on iopub on, every message until the hand-over (a reply to a peer whose routing id libzmq
 * made up excepted: it goes at once). */
bool pyc__handover_holds(pyc_kernel_t *k, int chan, const char *msg_type, const pyc_frame_t *idents,
                         size_t n_idents);
/* Holds such a message; the frames are taken over as pyc_io_t.send takes them.  Returns 0, or -1 when it could
 * not be kept (logged). */
int pyc__handover_hold(pyc_kernel_t *k, int chan, pyc_outframe_t *f, size_t n);
/* Sends what is held: to clients coming back (returning: each within its bound), or at once (no restore
 * happened, and the sockets did not change). */
void pyc__handover_send_held(pyc_kernel_t *k, bool returning);
/* In the restored kernel: takes the held answer and the forwarded requests from the state, and starts the
 * waits for the clients. */
void pyc__handover_resumed(pyc_kernel_t *k, json_t *state);
/* In the kernel whose hand-over failed, serving again: what the state took away is its own again, and the
 * held answer goes to the clients as they come back. */
void pyc__handover_failed(pyc_kernel_t *k, json_t *state);
/* Just after a restore: waits until as many iopub subscribers as the replaced kernel had are back, or until
 * the restore's bound on that wait has passed (then never again). */
void pyc__handover_await_subscribers(pyc_kernel_t *k);
/* Forgets what is held or forwarded (a kernel's end, a forked child's start). */
void pyc__handover_end(pyc_kernel_t *k);
/* In a snapshot just restored: takes the restorer's state (execution count, inputs, table). */
void pyc__snapshot_resumed(pyc_kernel_t *k, json_t *state, pid_t copy);
void pyc__snapshots_end(pyc_kernel_t *k);
/* {"count", "bytes"} of the snapshots, for usage_request (any thread: under usage_lock). */
json_t *pyc__snapshot_usage(pyc_kernel_t *k);
/* Before an execute_request: takes the snapshot the cell asks for (metadata pyc.snapshot: true or a name),
 * a transaction's (metadata pyc.transaction, or a first line %%transaction), or an automatic one (when
 * PYC_SNAPSHOTS is set), then keeps the automatic ones within their bounds.  Returns 1 in the snapshot once
 * restored (the caller drops the request: it was the restorer's), else 0. */
int pyc__snapshot_before_cell(pyc_kernel_t *k, const pyc_execreq_t *req);
/* Whether the cell being run is a transaction (pyc__snapshot_before_cell took its snapshot). */
bool pyc__snapshot_in_transaction(const pyc_kernel_t *k);
/* In an isolated cell's process: no snapshot may be taken there (they are the kernel's). */
void pyc__snapshots_off(pyc_kernel_t *k);
/* After a transaction's cell: drops its snapshot when the cell succeeded ("committed"), or asks for its
 * restore once the reply is out ("rolled_back"); NULL when the cell was no transaction. */
const char *pyc__snapshot_after_cell(pyc_kernel_t *k, bool ok);
/* The interpreter's kernel_call (py.h): "snapshot.take" {"name"?} and "snapshot.restore" {"name"} once the
 * running cell has been answered, "snapshot.list", "snapshot.drop" {"name"} at once. */
json_t *pyc__kernel_call(void *ctx, const char *op, json_t *args);
/* After a request: takes the snapshot a cell asked for (%snapshot), then restores one (%restore, a rolled
 * back transaction).  Returns 1 in a snapshot taken here once it is restored (the caller returns). */
int pyc__snapshot_after_request(pyc_kernel_t *k);

/* ---- handlers.c ----------------------------------------------------------------------------------------- */

void pyc__on_kernel_info(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
void pyc__on_is_complete(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
void pyc__on_complete(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
void pyc__on_inspect(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
void pyc__on_comm(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
void pyc__on_comm_info(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
void pyc__on_history(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
void pyc__on_connect(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
void pyc__on_shutdown(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
void pyc__on_interrupt(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
void pyc__on_usage(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
/* journal_request (control): records announced cells ("expect") and reports the journal (journal.h). */
void pyc__on_journal(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);


/* ---- host.c (the head of a cell's output) ---- */

/* Gives the output gate's head (pyc_outgate_keep) the text a reader sees of one output message the running
 * cell published: a stream's text, the text/plain of a result or display and a newline; nothing for other
 * messages, or when the head is full or off. */
void pyc__keep_output_text(pyc_kernel_t *k, const char *msg_type, json_t *content);

/* ---- lifelog.c ---------------------------------------------------------------------------------------- */

/* cell_started (outcome NULL) or cell_done with the outcome of metadata.pyc and what the cell published
 * (output: its counts; the head comes from k->out), for the execute_request msg (main thread; nothing for
 * silent cells, whose callers do not count them as cells). */
void pyc__lifelog_cell(pyc_kernel_t *k, const pyc_msg_t *msg, int count, const char *outcome,
                       const pyc_outgate_stats_t *output);

/* Records why the kernel ends (PYC__CLOSE_*) unless a cause was recorded first.  Any thread. */
void pyc__lifelog_close_reason(pyc_kernel_t *k, int why);

/* The closed event with the recorded reason (a shutdown when none), once per process.  Any thread. */
void pyc__lifelog_closed(pyc_kernel_t *k);

/* The closed event of a crash: the signal, its name and the Python traceback (cut to 16 KiB).  The crash
 * reporter's thread; bounded by the event lock's wait. */
void pyc__lifelog_crashed(pyc_kernel_t *k, int sig, const char *traceback);

/* In a session forked from this one: writes under name from now on (its own open file), and says ready,
 * forked from parent.  Without an event log, nothing. */
void pyc__lifelog_forked(pyc_kernel_t *k, const char *name, const char *parent);

/* The session's name when this kernel writes events, else NULL. */
const char *pyc__lifelog_session(const pyc_kernel_t *k);

/* Closes the event log (pyc_kernel_destroy). */
void pyc__lifelog_destroy(pyc_kernel_t *k);

/* ---- crash.c ------------------------------------------------------------------------------------------ */

/* In a forked session: crash reports of its own (the reporter thread is the parent's). */
int pyc__crash_restart_in_child(pyc_kernel_t *k, pyc_error_t *err);

/* ---- memcap.c ------------------------------------------------------------------------------------------- */

/* Under a memory cap: keeps (true) or gives back (false) the reserve. */
void pyc__memory_reserve(pyc_kernel_t *k, bool keep);

/* How the session's memory is fenced, for kernel_info: ["rlimit_data", "rss_watch"] under a cap, plus
 * {"cgroup": file, "bytes": N} for a memory limit of the cgroup the kernel runs in.  A new reference. */
json_t *pyc__memory_enforcement(const pyc_kernel_t *k);

/* ---- filecap.c ------------------------------------------------------------------------------------------ */

/* The descriptors the process has open now (from /proc/self/fd), or -1 when they cannot be listed (the
 * listing needs a descriptor of its own: a process at its limit cannot list them). */
int pyc__open_files(void);

/* Under an open-file cap: takes the reserve (true, before a cell, main thread: as many of its descriptors as
 * there is room for), or (false: after a cell, and from the guard thread while a cell runs) gives it back when
 * the process is at its limit.  The reserve's slots are atomic, so that the two threads may do so at once. */
void pyc__files_reserve(pyc_kernel_t *k, bool keep);

/* The most descriptors the process may have open (RLIMIT_NOFILE's soft limit), or -1 when unlimited. */
long long pyc__open_files_max(void);

/* ---- debugger.c ----------------------------------------------------------------------------------------- */

/* Control thread: takes over a debug_request whose busy status is out; the debugger's thread (started by the
 * first request) answers it and publishes its idle. */
void pyc__debug_request(pyc_kernel_t *k, pyc_msg_t *msg);

/* In a forked child: closes the descriptors of the parent's debugger (its thread does not exist here; its
 * memory is left as it is).  NULL-safe. */
void pyc__debugger_forget(pyc__debugger_t *d);

/* Stops the debugger's thread and frees it; NULL-safe.  Before the io goes. */
void pyc__debugger_destroy(pyc__debugger_t **d_p);

/* ---- subshell.c ----------------------------------------------------------------------------------------- */

/* Control thread: create_subshell_request, delete_subshell_request, list_subshell_request. */
void pyc__on_create_subshell(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
void pyc__on_delete_subshell(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);
void pyc__on_list_subshell(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);

/* Whether a shell request names a subshell (a subshell_id that is not null); and the error reply, between
 * busy and idle, to one whose subshell does not exist (why: NULL for that reason, else another). */
bool pyc__subshell_named(const pyc_msg_t *msg);

/* Whether a request is the kernel's rather than a shell's (history, pyc.fork's comm_open, control requests
 * sent on shell): the main thread answers it, whatever subshell it names. */
bool pyc__subshell_kernel_level(const pyc_msg_t *msg);

/* Main thread, between requests: joins and frees deleted subshells whose threads have returned. */
void pyc__reap_subshells(pyc_kernel_t *k);
void pyc__subshell_refuse(pyc_kernel_t *k, const pyc_msg_t *msg, const char *why);

/* The kernel is closing: stops every subshell (after its current request, a second at most each) and
 * starts no new one.  Returns how many threads are still running (left to the process's end). */
int pyc__end_subshells(pyc_kernel_t *k);

/* ---- thisshell.c (which shell the calling thread serves) ----------------------------------------------- */

/* The request the calling thread answers when it is a subshell's (NULL on every other thread), and whether
 * that request allows stdin. */
const pyc_msg_t *pyc__subshell_request(void);
bool pyc__subshell_allow_stdin(void);
/* The output gate of the subshell whose thread this is (its cells' output cap); NULL on every other thread. */
pyc_outgate_t *pyc__subshell_gate(void);
/* On a subshell's thread: whether that subshell is being deleted or the kernel is ending. */
bool pyc__subshell_stopping(void);

/* ---- control.c ------------------------------------------------------------------------------------------ */

/* Asks the main thread to stop the running cell, if any (SIGINT), or kills a running isolated cell's process
 * (iso_stop says why).  Any thread. */
void pyc__interrupt_main(pyc_kernel_t *k);

/* Stops the running cell: iso (a k->iso_pid reading), when positive, is an isolated cell's process, which is
 * killed whatever SIGINT handlers Python code set in it, with why (ISO_STOP_*) kept in iso_stop unless a
 * reason came first; otherwise the main thread gets SIGINT.  Any thread. */
void pyc__stop_cell(pyc_kernel_t *k, pid_t iso, int why);

/* Asks the kernel to shut down: sets quit, interrupts a running cell and wakes the main loop.  Any thread. */
void pyc__quit(pyc_kernel_t *k);

/* Any thread: raises KeyboardInterrupt in the subshells busy in a cell, from a thread of its own. */
void pyc__interrupt_subshells(pyc_kernel_t *k);

/* After a cell failed with stop_on_error: takes the requests already waiting on shell, so that they are
 * aborted (execute) or answered (the rest) after this request, in order. */
void pyc__abort_queue(pyc_kernel_t *k);

/* ---- storage.c ------------------------------------------------------------------------------------------ */

/* The history, opened on first use; NULL when it is off. */
pyc_history_t *pyc__history(pyc_kernel_t *k);

/* Asks the writer thread (persist.h) to commit the queued history rows: now once PYC__HISTORY_BATCH_CELLS rows
 * have gathered since the last such kick, else lazily, within PYC_PERSIST_BATCH_MS, so that cells that follow
 * each other (pipelined or one at a time) cost one commit per batch rather than one per cell.  Called when a
 * request comes and when the kernel goes idle (`idle`: the rows counted so far are then asked for). */
#define PYC__HISTORY_BATCH_CELLS 100
void pyc__history_kick(pyc_kernel_t *k, bool idle);

/* The session's checkpoint, made on first use; NULL when checkpoints are off or it could not be made. */
pyc_checkpoint_t *pyc__checkpoint(pyc_kernel_t *k);

/* Records a cell in the history: queued in memory now, committed by the writer thread after the reply
 * (persist.h), so that no database work is on the request path and no lock is held while the cell runs. */
void pyc__history_add(pyc_kernel_t *k, int count, const char *code);
/* Appends a successful cell to the session's checkpoint; a failure is logged once. */
void pyc__checkpoint_cell(pyc_kernel_t *k, int count, const char *code);
/* history_request's content: the rows asked for, the ones still queued included (written out first, with
 * the writer held off). */
json_t *pyc__history_answer(pyc_kernel_t *k, json_t *request);
/* Writes the queued rows now (a restore follows: they must be in the file before the ports move). */
void pyc__history_write_out(pyc_kernel_t *k);
/* The history session this kernel writes on (the restored one's, before the history is opened). */
int pyc__history_session_of(pyc_kernel_t *k);
/* The checkpoint's path when it was made (none is made here), else NULL; and whether it holds a cell. */
const char *pyc__checkpoint_path_if_made(pyc_kernel_t *k);
bool pyc__checkpoint_has_cells(pyc_kernel_t *k);
/* In a restored kernel: writes on the replaced kernel's history session, and takes its checkpoint over
 * (checkpoint: its path; held: the cells this snapshot holds). */
void pyc__store_resumed(pyc_kernel_t *k, int history_session, const char *checkpoint, int held);
/* The history writer around fork(2) (procfork.c): held before it, released after it in the parent, made
 * inert in the child (its thread is the parent's). */
enum { PYC__FORK_PREPARE, PYC__FORK_PARENT, PYC__FORK_CHILD };
void pyc__store_fork(pyc_kernel_t *k, int phase);

/* ---- procfork.c ----------------------------------------------------------------------------------------- */

/* Registers the fork handlers once per process (pthread_atfork) for kernel k, the process's one kernel, whose
 * pid is the kernel's from now on.  Returns 0, or -1 with err. */
int pyc__procfork_install(pyc_kernel_t *k, pyc_error_t *err);
/* Kernel k is being destroyed: the fork handlers guard it no more. */
void pyc__procfork_forget(pyc_kernel_t *k);

/* In a child of user code that returned from the cell: ends the process (it must not act as a kernel). */
void pyc__user_fork_exit(pyc_kernel_t *k);

#endif
