/*
 * cli.h -- what the subcommands of the `pyc` program share: exit codes, option parsing, opening a session,
 * the per-name lock, and printing a cell's output.
 *
 * Files: main.c (dispatch), commands.c (the command table: synopses, help, options), common.c (errors,
 * options, the runtime dir, sessions, locks), output.c (printing a request's output, the execute loop),
 * new.c (new), newkernel.c (the environment and options of new's kernel), handshake.c (new's registration
 * service, protocol 5.6), sessions.c (kill, ls), query.c (run, status, vars, complete, int), fire.c (fire,
 * poll), transfer.c (fork, cp), events.c (events, and the events other commands write), attach.c (the REPL),
 * lineedit.c (reading lines, readline loaded on demand).
 */
#ifndef PYC_CLI_H
#define PYC_CLI_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "args.h"
#include "client.h"
#include "clock.h"
#include "session.h"

/* Exit codes.  A command that runs a cell (`run`, `poll`, and the cell's own `SystemExit`) exits with the cell's
 * status as a script would: 0 ok, 1 the cell raised, n for SystemExit(n).  Every outcome of pyc's own has a
 * code of the sysexits range (64-78, <sysexits.h>), which Python code does not use by convention, so that an
 * agent tells "the cell exited n" from "pyc failed" by the number alone; the deadline is 124, the code of
 * timeout(1), which shells and agents already read as "ran past its time".  The one outcome line of `--json`
 * (cli_outcome_line) names the outcome in words as well, for the rare cell that exits with one of these.
 * Every failure of pyc's prints one line starting "pyc: " on stderr first (a cell that raised prints its
 * traceback instead).  Only PYC_EXIT_LOST says the session is gone; every other code leaves it as it was. */
enum {
    PYC_EXIT_OK = 0,
    PYC_EXIT_ERROR = 1,          /* the cell raised (as `python script.py` exits 1 on an uncaught exception) */
    PYC_EXIT_USAGE = 64,         /* EX_USAGE: bad arguments or a bad session name */
    PYC_EXIT_REFUSED = 65,       /* EX_DATAERR: the kernel refused the request (a `cp` of a name that cannot
                                  * be pickled, a `fork` it cannot make, an unknown snapshot, no journal) */
    PYC_EXIT_NOINPUT = 66,       /* EX_NOINPUT: a local file (`run @FILE`, `cp FILE ...`) or stdin could not
                                  * be read */
    PYC_EXIT_NOSESSION = 67,     /* EX_NOUSER: no session of that name, or it is stale (its kernel is gone) */
    PYC_EXIT_CONNECTION = 69,    /* EX_UNAVAILABLE: the kernel could not be started or did not answer (its
                                  * heartbeat is silent: stopped or stuck; `run --timeout` gave up; another pyc
                                  * holds the name too long).  The session, if any, is left as it is */
    PYC_EXIT_LOST = 70,          /* EX_SOFTWARE: the session was lost: the kernel ended during the request (a
                                  * crash, a cell stuck past its deadline, its lifetime ended, memory) */
    PYC_EXIT_OSERR = 71,         /* EX_OSERR: memory ran out, or a system call failed, on pyc's side */
    PYC_EXIT_EXISTS = 73,        /* EX_CANTCREAT: `new` or `fork` refused: a live (or unresponsive) session has
                                  * that name */
    PYC_EXIT_IOERR = 74,         /* EX_IOERR: a local file, the runtime dir's listing or stdout could not be
                                  * read or written (a full disk) */
    PYC_EXIT_PENDING = 75,       /* EX_TEMPFAIL: `poll`: the cell is not done yet (queued or running) */
    PYC_EXIT_PROTOCOL = 76,      /* EX_PROTOCOL: the kernel's messages do not verify with the session file's key,
                                  * or its answer makes no sense */
    PYC_EXIT_NOPERM = 77,        /* EX_NOPERM: the runtime dir (or a lock file in it) cannot be used safely */
    PYC_EXIT_TIMEOUT = 124,      /* timeout(1)'s code: the cell passed its deadline (--timeout) and the kernel
                                  * stopped it; the session is intact */
    PYC_EXIT_INTERRUPTED = 130,  /* Ctrl-C: the cell was interrupted (128 + SIGINT, as shells report it) */
    PYC_EXIT_PIPE = 141,         /* stdout's reader went away (128 + SIGPIPE, as shells report a tool killed by
                                  * SIGPIPE); nothing is printed, and a cell is left running */
};

/* How long a request waits for the kernel where nothing says otherwise: the iopub handshake of cli_connect,
 * the answer to `pyc int`, and attach's question whether a block is complete.  cli_connect_ms() is
 * CLI_CONNECT_MS, or the number of milliseconds in the environment variable PYC_CLI_CONNECT_MS (a whole
 * number from 1 to 3600000; anything else is ignored), read once.  The variable is for tests of a kernel that
 * does not answer, which need not wait 10 s each. */
#define CLI_CONNECT_MS 10000
int cli_connect_ms(void);

/* How long the heartbeat of a kernel may stay silent, once a wait has lasted 1 s, before the wait fails
 * (pyc_client_watch_heartbeat; cli_connect turns the watch on): CLI_HB_MS, or the milliseconds in
 * PYC_CLI_HB_MS (1 to 3600000; anything else is ignored), read once.  The same bound applies to a kernel
 * whose heartbeat answers but which drops every message we sign (the session file's key is not its key). */
#define CLI_HB_MS 3000
int cli_hb_ms(void);

/* Prints why a wait for the kernel failed (err of a PYC_RECV_ERROR) and returns the exit code it stands for:
 * PYC_EXIT_LOST when the kernel's process ended (PYC_EGONE), PYC_EXIT_PROTOCOL when its messages do not verify
 * with our key (PYC_EAUTH), else PYC_EXIT_CONNECTION. */
int cli_recv_failed(const pyc_error_t *err);

/* ---- options --------------------------------------------------------------------------------------------- */

/* Options are parsed by the common parser (args.h); these names keep the subcommands short. */
typedef pyc_argspec_t cli_optspec_t;
typedef pyc_args_t cli_args_t;
#define CLI_MAX_POS PYC_ARGS_MAX_POS

/* Parses argv[0..argc) (the words after the subcommand) with pyc_args_parse; prints the problem as
 * "pyc: CMD: ... (see pyc CMD --help)" and returns -1 when the words do not fit the specs.  main.c calls it
 * with the command table's specs. */
int cli_parse(const char *cmd, int argc, char **argv, const cli_optspec_t *specs, int nspecs, cli_args_t *out);

/* Parses a positive number of seconds; prints the problem and returns -1 on anything else. */
int cli_seconds(const char *opt, const char *text, double *out);

/* Prints "pyc: <message>\n" on stderr.  cli_last_err: the last such message (without "pyc: "), or NULL. */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *cli_last_err(void);

/* ---- sessions -------------------------------------------------------------------------------------------- */

/* The runtime dir into out (created, mode 0700, when missing).  It must be a directory (not a symbolic link)
 * owned by us that group and others cannot write; it is checked once per process.  Prints the problem and
 * returns -1 (the command then exits PYC_EXIT_NOPERM). */
int cli_runtime_dir(char *out, size_t cap);

/* Where a session's file of the given suffix (".json", ".lock", ".log") is. */
int cli_session_path(char *out, size_t cap, const char *name, const char *suffix);

/* What a session file says about its kernel. */
typedef enum { CLI_MISSING, CLI_LIVE, CLI_STALE, CLI_BROKEN, CLI_UNRESPONSIVE } cli_state_t;

/* Loads pyc-NAME.json into sf and judges it: CLI_MISSING (no file; sf empty), CLI_BROKEN (unreadable; why in
 * err; sf empty), CLI_STALE (its process is gone, or its pid names another process now), CLI_UNRESPONSIVE
 * (its very process is alive but its heartbeat does not answer within hb_ms: stopped, or stuck), or
 * CLI_LIVE.  Only CLI_STALE and CLI_BROKEN may be cleaned without being asked; an unresponsive kernel may
 * hold state and is ended only by `kill` or `new --replace`.  hb_ms 0 skips the heartbeat (a live process
 * counts as live). */
cli_state_t cli_session_state(const char *name, pyc_session_file_t *sf, int hb_ms, pyc_error_t *err);

/* The state of a session whose heartbeat did not answer: CLI_UNRESPONSIVE when sf names a process that is
 * still the one recorded, else CLI_STALE. */
cli_state_t cli_silent_state(const pyc_session_file_t *sf);

/* A connected client for session NAME (with a stdin socket when with_stdin), whose iopub is live when
 * sync_iopub, watching the kernel's process and its heartbeat (cli_hb_ms).
 * On failure prints why and returns NULL with *rc the exit code (NOSESSION, USAGE or CONNECTION).  sf holds
 * the session file on success (clear it after destroying the client). */
pyc_client_t *cli_connect(const char *name, pyc_session_file_t *sf, bool sync_iopub, bool with_stdin, int *rc);

/* cli_connect's second half, for a kernel known by sf alone (a template, which has no session file): the
 * client, watching sf->pid when it is set; name is what messages call it.  Takes sf over on failure. */
pyc_client_t *cli_client_for(const char *name, pyc_session_file_t *sf, bool sync_iopub, bool with_stdin, int *rc);

/* How long `new`, `fork` and `kill` wait for another `pyc` that holds the name's lock: 2 minutes, twice the
 * time a `new` gives its kernel to answer by default. */
#define CLI_LOCK_WAIT_MS 120000

/* Takes the lock of NAME (flock on pyc-NAME.lock), waiting up to timeout_ms for another `pyc` that holds it,
 * and writes `why` ("new", "fork", "kill") into it for `pyc ls`.  Returns 0 with *fd the lock's descriptor,
 * or the exit code (printed): PYC_EXIT_INTERRUPTED when a SIGINT came (cli_catch_sigint) before the lock was
 * had, PYC_EXIT_CONNECTION when it cannot be had. */
int cli_lock(const char *name, int timeout_ms, const char *why, int *fd);

/* True when some process holds NAME's lock now; why (cap bytes) gets what its holder said it does ("new",
 * "fork", "kill"), or "" when it did not say. */
bool cli_locked(const char *name, char *why, size_t cap);

/* Releases the lock.  With remove, or when NAME has no session file, it first deletes the lock file (while
 * still holding it: a process that waited notices the change of inode and locks a fresh file). */
void cli_unlock(const char *name, int fd, bool remove);

/* True while this process holds NAME's lock (cli_lock). */
bool cli_lock_is_ours(const char *name);

/* Ends a session's kernel and removes its files (connection file and log).  A live kernel gets a
 * shutdown_request and grace_ms to exit, then SIGKILL; an unresponsive or stale one, SIGKILL when its pid
 * still names the very process recorded.  The caller holds the lock.  Returns 0, or -1 when the kernel could
 * not be ended (printed). */
int cli_session_end(const char *name, pyc_session_file_t *sf, cli_state_t state, int grace_ms);

/* The same for `new --replace`: the kernel is told that it is replaced (its closed event says so), and
 * when it must be killed, the closed event written says "replaced" rather than "killed". */
int cli_session_replace(const char *name, pyc_session_file_t *sf, cli_state_t state, int grace_ms);

/* ---- the event log (eventlog.c; events.h) ---------------------------------------------------------------- */

/* Appends {"event": "closed", "reason": reason} for session NAME's kernel pid: killed, replaced, vanished.
 * A failure is a warning on stderr, never the command's failure. */
void cli_event_closed(const char *name, long pid, const char *reason);

/* The last closed event of session NAME's kernel pid in the log (a new reference), or NULL when none. */
json_t *cli_event_closing(const char *name, long pid);

/* A session's kernel was found gone: records closed/vanished unless the kernel (or another pyc) said how
 * it ended, or another pyc holds the name's lock (it is ending the kernel, and says how). */
void cli_notice_gone(const char *name, const pyc_session_file_t *sf);

/* The STATE `ls` shows for a stale session that ended as closed (a closed event) says: "crashed
 * (SIGSEGV)", "ended (idle timeout)", ... or "stale" when it vanished. */
void cli_closed_state(const json_t *closed, char *out, size_t cap);

/* ---- checkpoints of ended sessions (checkpoints.c) ------------------------------------------------------- */

/* The cells of the checkpoint file path, counted up to at_most (0: all; 1 reads only the file's head): -1 when
 * it is not a pyc checkpoint or cannot be read.  kernel_id (may be NULL) gets the kernel the header names
 * ("pyc-NAME" for a kernel of `pyc new NAME`), "" when none. */
long cli_checkpoint_cells(const char *path, long at_most, char *kernel_id, size_t id_cap);

/* The checkpoint of session NAME's kernel pid that holds a cell: its closed event's, else its ready event's
 * (malloc'd), or NULL. */
char *cli_checkpoint_of(const char *name, long pid);

/* The newest checkpoint of session NAME that holds a cell, the one `pyc new NAME --replay` takes (malloc'd,
 * *cells its cells; cells may be NULL), or NULL. */
char *cli_checkpoint_newest(const char *name, long *cells);

/* Prints "pyc: session NAME's cells are in its checkpoint PATH: pyc new NAME --replay brings them back". */
void cli_checkpoint_hint(const char *name, const char *path);

/* (query.c) `pyc status` of a session that is not live: when it is stale, or gone with a checkpoint of its name left,
 * prints on stdout {name, pid, state: "stale" or "none", reason and signal (when the log knows how it ended),
 * checkpoint, replay: the command that brings it back}, and returns 1; else 0 (nothing printed). */
int cli_status_ended(const char *name);

/* ---- the kernel of `pyc new` (newkernel.c) --------------------------------------------------------------- */

/* Sets NAME=VALUE in the kernel's environment (a later setting of a name replaces an earlier one).  Returns 0,
 * or -1 (printed). */
int cli_new_add_env(const char *name, const char *value);

/* The kernel's environment: ours without JPY_PARENT_PID, with what cli_new_add_env set (and without
 * PYC_PYTHON_EXE after --no-env).  Made before fork; NULL when memory runs out. */
char **cli_new_environ(void);

/* --kernel SPEC (a name without '/'): the kernelspec's program into out, and its env into the kernel's.
 * Returns 1 when found, 0 when there is no such kernelspec, -1 (printed). */
int cli_new_kernel_from_spec(const char *spec, char *out, size_t cap);

/* The Python environment the kernel runs in: --python PATH, none with --no-env, else the active one.
 * Returns 0, or -1 (printed). */
int cli_new_choose_environment(const char *python, bool no_env);

/* The kernel's options from new's limit flags and --replay, each checked first, and the default idle
 * timeout: into cli_new_kernel_opts[0..cli_new_n_kernel_opts).  Returns 0, or -1 (printed: a usage error). */
#define CLI_NEW_MAX_KERNEL_OPTS 12
#define CLI_EVENT_OUTPUT_MAX ((size_t)4096)   /* the kernel's PYC_LIMITS_EVENT_OUTPUT_MAX (limit.h) */
int cli_new_kernel_options(const cli_args_t *a);
extern char *cli_new_kernel_opts[CLI_NEW_MAX_KERNEL_OPTS];
extern size_t cli_new_n_kernel_opts;

/* ---- the startup handshake (handshake.c) ------------------------------------------------------------------ */

/* A listening socket on 127.0.0.1 for a kernel's registration; its port in *port.  Returns the descriptor
 * (close-on-exec, non-blocking), or -1 (printed). */
int cli_registration_listen(int *port);

/* Writes the registration file for cf's key, scheme and CURVE keys (no ports) at path, mode 0600. */
int cli_registration_write(const char *path, const char *kernel_id, const pyc_connfile_t *cf, int port,
                           pyc_error_t *err);

/* Waits on lfd for the report of kernel_id (process pid) until deadline, checks its signature, answers with
 * a signed ACK, and fills cf's ports.  Returns 0; 1 when the process exited first (reaped); -1 with err. */
int cli_registration_wait(int lfd, const char *kernel_id, pyc_connfile_t *cf, pid_t pid, double deadline,
                          pyc_error_t *err);

/* ---- output of a request --------------------------------------------------------------------------------- */

typedef struct cli_output {
    bool json;                   /* one JSON object per line instead of text */
    bool wrote_nl;               /* the last text written to stdout ended with a newline (or none was written) */
    bool system_exit;            /* a SystemExit is the command's exit (run): no traceback; its text, when it
                                  * is not a number, goes to stderr as Python prints it */
} cli_output_t;

/* Prints one iopub message of the request: streams to stdout/stderr, results and displays as their
 * text/plain, errors' tracebacks to stderr (but see system_exit); in JSON mode every message but status and
 * execute_input as {"type": msg_type, "content": ...}. */
void cli_print_iopub(cli_output_t *o, const pyc_msg_t *m);

/* Prints a JSON object as one line on stdout (compact). */
void cli_print_json_line(json_t *v);

/* Writes n bytes of text to stdout through the same writer. */
void cli_print_text(const char *s, size_t n);

/* Output to stdout goes through one writer that remembers the first failed write and writes nothing more
 * after it.  cli_stdout_closed: true once a write failed with EPIPE (the reader is gone).
 * cli_stdout_finish (main, after the command): flushes stdout and returns the exit code: rc when all was
 * written; PYC_EXIT_PIPE, silently, when the reader went away (rc kept if it was already a failure); else
 * prints "pyc: cannot write to stdout: ..." and returns PYC_EXIT_IOERR (or rc when that was a failure). */
bool cli_stdout_closed(void);
int cli_stdout_finish(int rc);

/* Prints on stderr, as one line, the names an isolated cell bound that were not merged back into the session
 * (metadata.pyc.skipped of its reply), each with the gist of why:
 *   pyc: not merged back (cannot be pickled): f (generator), j (module: re-import it)
 * Nothing when the reply has none.  cli_execute calls it in text mode (--json prints the metadata itself). */
void cli_report_unmerged(const pyc_msg_t *reply);

/* The exit code an execute_reply stands for, in this order:
 *   1) LOST when its metadata.pyc says the session is lost: state "lost", kernel_ending, or outcome
 *      "lifetime" (whatever the status: the kernel ends after this reply);
 *   2) OK for status "ok";
 *   3) for a SystemExit, the status Python would exit with: its evalue (str of the code) "", "None" or
 *      "False" is 0, "True" 1, an integer n is n & 0xff, any other text 1;
 *   4) TIMEOUT when the cell passed its deadline (CellTimeout, outcome "timeout", timed_out);
 *   5) INTERRUPTED when interrupted is true and the cell ended by KeyboardInterrupt;
 *   6) ERROR. */
int cli_reply_exit(const pyc_msg_t *reply, bool interrupted);

/* True when an execute_reply says the kernel is ending after it (1 of cli_reply_exit). */
bool cli_reply_lost(const pyc_msg_t *reply);

/* The outcome, in words, of the last execute_reply judged by cli_reply_exit, and the code it gave: "lost",
 * "ok", "system_exit", "timeout", "interrupted" or "raised" (in cli_reply_exit's order); NULL when no reply
 * was judged.  The code is the cell's own for "ok", "raised" and "system_exit", pyc's for the others. */
const char *cli_cell_outcome(int *code);

/* True when rc is the status of the cell itself (ok, raised, its SystemExit) as cli_reply_exit judged it last,
 * not one of pyc's own outcomes with the same number: a cell's sys.exit(70) is not a lost session. */
bool cli_exit_is_cells(int rc);

/* Prints the outcome line that ends the --json output of a command that runs a cell (`run`, `poll` of one
 * cell; the command table's outcome_line): {"type": "outcome", "outcome": WORD, "exit": rc, "by": "cell" or
 * "pyc", "message": the last "pyc: " line or null}.  WORD is the judged reply's (cli_cell_outcome) when rc is
 * its code, else the name of pyc's own exit code (usage, refused, no_input, no_session, unavailable, lost,
 * system_error, exists, io_error, pending, protocol, no_permission, timeout, interrupted).  "by" is "cell"
 * when rc is the cell's own status (ok, raised, system_exit), so that a cell's sys.exit(70) is never read as
 * a lost session: this line is the channel that does not depend on a number.  Nothing when stdout's reader
 * is gone. */
void cli_outcome_line(int rc);

/* ---- signals --------------------------------------------------------------------------------------------- */

/* Counts SIGINTs from the moment cli_catch_sigint is called; the handler only counts, so that a wait in
 * poll returns with EINTR and the command decides. */
extern volatile sig_atomic_t cli_sigint_count;
void cli_catch_sigint(void);

/* ---- the command table (commands.c) ---------------------------------------------------------------------- */

/* One subcommand, as redis's command table has them.  main.c parses the words after the command's name with
 * its specs and calls fn only with words that fit: a bad option, --help and a wrong number of positional
 * words are answered from the entry (PYC_EXIT_USAGE, 0 and PYC_EXIT_USAGE), so that each usage line is
 * written once. */
typedef struct cli_command {
    const char *name;
    int (*fn)(const cli_args_t *a);  /* runs the command with its parsed words; returns the exit code */
    const char *synopsis;        /* what follows "pyc ": the positional words, then the options in brackets */
    const char *summary;         /* its line in `pyc --help` */
    const char *help;            /* what `pyc CMD --help` prints after "usage: pyc SYNOPSIS" */
    const cli_optspec_t *specs;  /* its options, indexed by its CLI_<CMD>_* enum below; NULL when none */
    int nspecs;
    int min_pos, max_pos;        /* how many positional words it takes; max_pos -1: no limit */
    bool outcome_line;           /* with its "json" option and max_pos words (one cell: `poll NAME ID`, not
                                  * `poll NAME`), main.c ends the output with cli_outcome_line */
} cli_command_t;

extern const cli_command_t cli_commands[];
extern const size_t cli_ncommands;

/* The entry of the command called name, or NULL. */
const cli_command_t *cli_command_find(const char *name);

/* Prints `pyc CMD --help` on stdout: "usage: pyc SYNOPSIS", then the help. */
void cli_command_help(const cli_command_t *cmd);

/* Prints "pyc: CMD: usage: pyc SYNOPSIS" and returns PYC_EXIT_USAGE. */
int cli_usage_error(const char *name);

/* What a command returns for words that the counts of the table cannot judge (kill takes names or --all, not
 * both): the caller (main.c) prints the command's usage line and exits with PYC_EXIT_USAGE.  A command does
 * not call cli_usage_error itself, so that no command depends on the table that names it. */
#define CLI_BAD_USAGE (-PYC_EXIT_USAGE)

/* The options of each command, as indexes into cli_args_t.value (its argument, "" for a flag given, NULL
 * when absent). */
enum { CLI_NEW_REPLACE, CLI_NEW_KERNEL, CLI_NEW_JSON, CLI_NEW_TIMEOUT, CLI_NEW_CURVE, CLI_NEW_PYTHON, CLI_NEW_NO_ENV,
       CLI_NEW_IDLE, CLI_NEW_LIFETIME, CLI_NEW_CELL_TIMEOUT, CLI_NEW_OUTPUT_LIMIT, CLI_NEW_MEMORY, CLI_NEW_REPLAY,
       CLI_NEW_EVENT_OUTPUT, CLI_NEW_CELL_CPU, CLI_NEW_OPEN_FILES, CLI_NEW_FROM, CLI_NEW_NOPTS };
enum { CLI_RUN_JSON, CLI_RUN_TIMEOUT, CLI_RUN_ISOLATE, CLI_RUN_NOPTS };
enum { CLI_LS_JSON, CLI_LS_NOPTS };
enum { CLI_COMPLETE_JSON, CLI_COMPLETE_NOPTS };
enum { CLI_KILL_ALL, CLI_KILL_NOPTS };
enum { CLI_FORK_JSON, CLI_FORK_NOPTS };
enum { CLI_SNAP_JSON, CLI_SNAP_NOPTS };
enum { CLI_CP_TIMEOUT, CLI_CP_NOPTS };
enum { CLI_FIRE_JSON, CLI_FIRE_TIMEOUT, CLI_FIRE_ISOLATE, CLI_FIRE_NOPTS };
enum { CLI_POLL_JSON, CLI_POLL_WAIT, CLI_POLL_NOPTS };
enum { CLI_EVENTS_FOLLOW, CLI_EVENTS_SINCE, CLI_EVENTS_JSON, CLI_EVENTS_NOPTS };

/* Sends one request to a comm target and waits for its answer, up to timeout_s (0: as long as the kernel's
 * process lives; after a few seconds a line says that the request waits for a running cell).  Returns the
 * answer message (its content.data holds the answer, its buffers the pickle of a get) with *rc
 * PYC_EXIT_OK, or NULL with *rc set (printed): PYC_EXIT_CONNECTION when no answer came in time (or the
 * kernel is stopped, or ignores our key), PYC_EXIT_LOST when its process ended meanwhile.  An answer
 * whose status is not "ok" is printed and still returned, with *rc PYC_EXIT_ERROR: fork's error answer lists
 * the children made before the failure, which must be ended.  (transfer.c) */
pyc_msg_t *cli_comm_request(pyc_client_t *cl, const char *session, const char *target, json_t *data,
                            const pyc_frame_t *bufs, size_t nbufs, double timeout_s, int *rc);

/* The commands (a->pos[0] is NAME wherever the synopsis starts with NAME). */
int cli_new(const cli_args_t *a);
int cli_kill(const cli_args_t *a);
int cli_ls(const cli_args_t *a);
int cli_run(const cli_args_t *a);
int cli_status(const cli_args_t *a);
int cli_vars(const cli_args_t *a);
int cli_complete(const cli_args_t *a);
int cli_int(const cli_args_t *a);
int cli_fork(const cli_args_t *a);

/* `pyc new NAME --from SOURCE`: session NAME as a fork of SOURCE, a live session or a live warm template of
 * that name (pyc_client's template provisioner, README "Kernels from a warm template"); a live NAME is ended
 * first when replace, else refused.  Returns the exit code. */
int cli_new_from(const char *source, const char *name, bool replace, bool as_json);
int cli_cp(const cli_args_t *a);
int cli_attach(const cli_args_t *a);
int cli_fire(const cli_args_t *a);
int cli_poll(const cli_args_t *a);
int cli_snapshot(const cli_args_t *a);
int cli_snapshots(const cli_args_t *a);
int cli_undo(const cli_args_t *a);

/* The code of a cell as `run` and `fire` take it: "-" is stdin, "@PATH" (one line) a file's contents,
 * anything else the code itself.  A new string, or NULL (printed) when it cannot be read. */
char *cli_read_code(const char *arg);

/* The metadata of a cell's execute_request for --timeout (0: none) and --isolate: {"pyc": {...}}, with "pace":
 * false (pyc waits for the idle: the kernel need not hold the reply back for relays). */
json_t *cli_cell_metadata(double timeout, bool isolate);
int cli_events(const cli_args_t *a);

/* The execute loop shared by run and attach: sends code with the given metadata (may be NULL), prints the output until
 * both the reply and the idle status have come, forwards Ctrl-C as interrupt_request, and answers input_request from
 * the terminal when allow_stdin.  After the cell's output, and before the reply's line in JSON mode, it prints the
 * late outputs of earlier cells that the reply says the journal holds (what their threads printed after they ended;
 * see show_late in output.c).  Returns the exit code (PYC_EXIT_PIPE at once, the cell still running, when stdout's
 * reader went away); *reply_out (may be NULL) gets the reply.  When the metadata holds a deadline (pyc.timeout S), the
 * wait is bounded too: after S + CLI_CELL_GRACE_S + max(5 s, S / 10) without the reply, the client gives up with
 * PYC_EXIT_CONNECTION (the kernel should have stopped the cell, or reported it stuck and ended, well before).  A
 * kernel whose process ends during the wait is PYC_EXIT_LOST ("the kernel (pid P) died during the cell"). */
#define CLI_CELL_GRACE_S 5.0     /* the kernel's default --cell-grace */
int cli_execute(pyc_client_t *cl, const char *code, json_t *metadata, bool allow_stdin, cli_output_t *o,
                pyc_msg_t **reply_out);

/* ---- reading lines (lineedit.c) -------------------------------------------------------------------------- */

/* Completes the line being typed for Tab: line is the whole line, point the cursor and start the beginning of
 * the word before it (byte offsets).  Returns what readline's rl_completion_matches returns: NULL for no
 * match, else a malloc'd, NULL-terminated array of malloc'd strings whose [0] replaces line[start..point)
 * and whose others (if any) are the candidates to show. */
typedef char **(*cli_complete_fn)(const char *line, int start, int point);

/* What cli_line_read found. */
enum { CLI_LINE_OK, CLI_LINE_EOF, CLI_LINE_CANCEL };

/* True when lines are edited: pyc was built with readline and it loaded (it is loaded on the first call). */
bool cli_line_editing(void);

/* Sets up the REPL's line editing: Tab calls complete, and lines given to cli_line_remember are kept in the
 * file history (NULL: none), read now and written by cli_line_end.  Does nothing without line editing. */
void cli_line_begin(cli_complete_fn complete, const char *history);
void cli_line_remember(const char *line);
void cli_line_end(void);

/* Shows prompt and reads one line: CLI_LINE_OK with *line malloc'd (without its newline), CLI_LINE_EOF at end
 * of input (Ctrl-D), or CLI_LINE_CANCEL when Ctrl-C abandoned the line (printed as "^C").  With line editing
 * the line comes pre-filled with indent (may be NULL), unless more input is already waiting (pasted text
 * brings its own indentation). */
int cli_line_read(const char *prompt, const char *indent, char **line);

/* Reads a line from the terminal for an input_request: without echo when password.  Returns a malloc'd line
 * without its newline, or NULL at end of input or after Ctrl-C (which cli_execute then forwards as an
 * interrupt). */
char *cli_read_input(const char *prompt, bool password);

#endif
