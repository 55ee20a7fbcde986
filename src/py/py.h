/*
 * py.h -- the kernel's only door into CPython.  Everything behind it lives in src/py/ and is the only code
 * that includes Python.h; this header itself is plain C so that kernel.c stays free of Python.
 *
 * Threading contract: pyc_py_init runs on the main thread and returns with the GIL released.  Every other
 * function here must be called on the main thread between pyc_py_enter and pyc_py_leave.
 */
#ifndef PYC_PY_H
#define PYC_PY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "embedded.h"
#include "error.h"
#include "frame.h"
#include "msg.h"

/* What the interpreter needs from the kernel.  Callbacks run on whatever thread Python code runs on (user
 * threads print too); they never call back into Python. */
typedef struct pyc_py_host {
    void *ctx;
    /* Publishes an iopub message for the current request; steals content.  Streams are flushed first so
     * that output stays in order. */
    void (*publish)(void *ctx, const char *msg_type, json_t *content);
    /* Publishes content, JSON text of len bytes (malloc'd, taken; NULL when it could not be made: dropped
     * and logged), with metadata (JSON text, malloc'd and NUL-terminated, taken; may be NULL) and binary
     * buffers for the current request.  plain (borrowed, may be NULL): the text/plain of a result or display,
     * for the cell's event.  The buffers are taken over as pyc_io_t.send takes frames: copied, or lent until
     * their releaser runs. */
    void (*publish_text)(void *ctx, const char *msg_type, char *content, size_t len, char *metadata,
                         const char *plain, size_t plain_len, pyc_outframe_t *buffers, size_t nbuf);
    /* Appends text to stdout (0) or stderr (1), and flushes both. */
    void (*stream_write)(void *ctx, int which, const char *data, size_t n);
    void (*stream_flush)(void *ctx);
    /* Asks the frontend for a line of input (main thread, GIL released by the caller).  Returns 0 with a
     * malloc'd reply in *out; 1 when interrupted (SIGINT); -1 with err when stdin is not allowed or the
     * request failed. */
    int (*input)(void *ctx, const char *prompt, bool password, char **out, pyc_error_t *err);
    /* A new reference to the header of the request that output is published for (the current parent), or
     * NULL before the first request. */
    json_t *(*parent)(void *ctx);
    /* A malloc'd copy of the current parent's header frame (its JSON as received) in *out, and its length;
     * 0 and NULL before the first request. */
    size_t (*parent_copy)(void *ctx, char **out);
    /* As stream_write, for a thread that a cell started: parent is that cell's header frame (from
     * parent_copy).  Text for the current parent is coalesced as usual; text for an earlier cell is
     * published at once under its own parent, so that it appears in the cell that started the thread. */
    void (*stream_write_for)(void *ctx, int which, const char *data, size_t n, const char *parent, size_t plen);
    /* An operation of the kernel asked for by Python code (the %snapshot magics): op and args (borrowed)
     * give an answer, a new reference, {"status": "ok", ...} or {"status": "error", "evalue"}.  Main thread,
     * with the GIL released by the caller. */
    json_t *(*kernel_call)(void *ctx, const char *op, json_t *args);
} pyc_py_host_t;

typedef struct pyc_py_config {
    const char *program_name;    /* argv[0], for sys.argv */
    const char *python_exe;      /* sys.executable */
    const pyc_embedded_file_t *python_files; /* the `pyc` package, served to import; may be NULL */
} pyc_py_config_t;

/* Starts the interpreter, installs the kernel's sys.stdout/sys.stderr/displayhook/input, and releases the
 * GIL.  Returns 0, or -1 with err. */
int pyc_py_init(const pyc_py_config_t *cfg, const pyc_py_host_t *host, pyc_error_t *err);

/* Takes and releases the GIL: on the main thread, and on a subshell's thread around the requests it answers
 * with the functions below that say "main thread" (complete, inspect, is_complete, comms). */
void pyc_py_enter(void);
void pyc_py_leave(void);

/* Where the interpreter runs: {"prefix", "base_prefix", "executable", "venv"} as it started (a new
 * reference).  Any thread, after pyc_py_init. */
json_t *pyc_py_environment(void);

/* Runs the start-up files an IPython kernel runs (PYTHONSTARTUP, then the .py and .ipy files of the
 * profile's and the system's startup directories; startup.c) in the user namespace, unless PYC_NO_STARTUP
 * is set to anything but 0.  Main thread, GIL released, after pyc_py_init and before the first request.
 * What the files print, and each failing file's traceback, go to log_fd; a failing file is not an error of
 * this function.  Returns 0, or -1 with err when the files could not be run at all. */
int pyc_py_run_startup(int log_fd, pyc_error_t *err);

/* The version of the embedded interpreter, "3.11.2".  Valid after pyc_py_init, from any thread. */
const char *pyc_py_version(void);

typedef struct pyc_py_exec_opts {
    bool silent;
    bool store_history;
    bool allow_stdin;
    bool plain_errors;           /* tracebacks without ANSI colors (the client asked, or NO_COLOR is set) */
    int execution_count;         /* shown in execute_result */
    json_t *user_expressions;    /* borrowed; may be NULL */
    unsigned long cell_token;    /* a subshell's cell: a number that no other cell of the process has, by which
                                  * pyc_py_interrupt_threads names it; 0 for other cells */
} pyc_py_exec_opts_t;

typedef struct pyc_py_exec_result {
    bool ok;
    json_t *payload;             /* new reference: the execute_reply payload list (page, ...) */
    json_t *error;               /* new reference when !ok: {"ename", "evalue", "traceback"} */
    json_t *user_expressions;    /* new reference: an object (empty when none were asked) */
} pyc_py_exec_result_t;

/* Runs a cell in __main__.  The last expression statement goes through sys.displayhook (which publishes
 * execute_result unless silent).  Exceptions, KeyboardInterrupt and SystemExit end the cell, never the
 * kernel.  SIGINT raises KeyboardInterrupt only while this runs. */
void pyc_py_execute(const char *code, const pyc_py_exec_opts_t *opts, pyc_py_exec_result_t *res);

/* As pyc_py_execute, on a subshell's thread (any thread but the main one), without the GIL: takes it itself.
 * The cell is that thread's own (its displayhook, input() and payloads), shares __main__, and leaves In/Out
 * and the history to the main shell.  SIGINT does not reach it; pyc_py_interrupt_threads does. */
void pyc_py_execute_subshell(const char *code, const pyc_py_exec_opts_t *opts, pyc_py_exec_result_t *res);

/* Any thread, without the GIL: raises KeyboardInterrupt in the subshell cells whose cell_tokens are given,
 * at their next bytecode (a thread blocked in C sees it when the call returns), if they are still running.
 * A cell is named by its token, not by its thread, because the interrupt may come late (the caller's thread
 * waits for the GIL): by then the thread may have ended that cell and begun the next, which must not be hit.
 * Takes the GIL, so the caller must not be a thread that the GIL could keep waiting. */
void pyc_py_interrupt_cells(const unsigned long *tokens, size_t n);

/* A thread of the kernel's own that runs Python now and then (a subshell's) keeps one Python thread state from
 * begin to end, so that its threading.local() values, its asyncio loop and its threading identity last
 * between its requests, and each request's GIL costs no new state.  Any thread, without the GIL; begin
 * returns NULL when memory runs out (each request then makes a state of its own). */
typedef struct pyc_py_thread pyc_py_thread_t;
pyc_py_thread_t *pyc_py_thread_begin(void);
void pyc_py_thread_end(pyc_py_thread_t *t);

/* The calling thread's Python ident (threading.get_ident()). */
unsigned long pyc_py_thread_ident(void);

/* Any thread: the request whose output the calling thread's streams go to (a header frame, copied), or
 * none (NULL): pending text is handed over first.  A subshell's thread sets it around each request. */
void pyc_py_thread_parent(const char *header, size_t len);

/* The kernel's asyncio loop between requests (pyc._asyncio).  pyc_py_async_active is true once the loop
 * exists (any thread, no GIL needed).  pyc_py_async_pending says whether it has work now: true with *fd the
 * loop's selector (-1 when it has none to offer) and *timeout_ms until its next timer (0: callbacks are
 * ready; -1: only the selector can wake it).  pyc_py_async_step runs one pass of the loop without waiting.
 * Both with the GIL held (between pyc_py_enter and pyc_py_leave). */
bool pyc_py_async_active(void);
bool pyc_py_async_pending(int *fd, int *timeout_ms);
void pyc_py_async_step(void);

/* Answers complete_request and inspect_request: new reply contents (status ok, or error with ename and
 * evalue when the support code fails).  cursor_pos counts Unicode code points. */
json_t *pyc_py_complete(const char *code, long cursor_pos);
json_t *pyc_py_inspect(const char *code, long cursor_pos, int detail_level);

/* Makes the completer's next answers quick (pyc._complete.warm_up: jedi's first completion parses its
 * stubs, over a second on some Pythons); until then complete_request is answered by the standard library's
 * completer first.  The kernel calls it once, idle, after its first complete_request. */
void pyc_py_complete_warm_up(void);

/* Hands comm_open, comm_msg or comm_close from the frontend to pyc._comm; problems are printed to the
 * cell's stderr, never raised.  The message's buffers reach Python as writable memoryviews of the received
 * frames, not copies: they take a hold on the frames' storage (pyc_msg_hold), so msg may be destroyed as
 * usual while Python still uses them. */
void pyc_py_comm(const pyc_msg_t *msg);

/* Answers comm_info_request: a new {"status": "ok", "comms": {id: {"target_name": ...}}}. */
json_t *pyc_py_comm_info(json_t *content);

/* Answers is_complete: returns a new object {"status": "complete"|"incomplete"|"invalid"|"unknown",
 * "indent": "..." (incomplete only)}. */
json_t *pyc_py_is_complete(const char *code);

/* How many SIGINTs have reached a running cell since start-up (lock-free, async-signal-safe counter);
 * the difference across a cell tells whether it was interrupted. */
unsigned pyc_py_interrupt_count(void);

/* True when SIGINT arrived while the current cell runs.  Safe without the GIL, from the main thread. */
bool pyc_py_interrupt_pending(void);

/* CPython's side of fork(2), with the GIL held: pyc_py_fork_prepare before (PyOS_BeforeFork: the import
 * lock and os.register_at_fork "before" handlers), pyc_py_fork_done after, in both processes, with what
 * fork returned (PyOS_AfterFork_Child / _Parent and their handlers).  The handlers are Python code that may
 * print or block, so the caller must not hold any of the kernel's own locks around these two calls. */
void pyc_py_fork_prepare(void);
void pyc_py_fork_done(pid_t pid);

/* Before the first fork of a kernel, with the GIL held: does here, once, the work every forked session would
 * otherwise do at its first cell (pyc._shell.prepare_fork: the namespace's In/Out and the look for IPython
 * along sys.path), so that the children share its pages (measured: 70 of a session's 600 written pages).
 * A failure is reported and changes nothing else. */
void pyc_py_warm_for_fork(void);

/* Fork-isolated cells (pyc._isolate), with the GIL held.  In the child: snapshot before the cell, and
 * collect after it (a malloc'd pickle blob of the names the cell bound, their list, and the names skipped
 * with reasons).  In the parent: merge such a blob into __main__.  Return 0, or -1 with err. */
int pyc_py_isolate_snapshot(pyc_error_t *err);
int pyc_py_isolate_collect(char **blob, size_t *len, json_t **merged, json_t **skipped, pyc_error_t *err);
int pyc_py_isolate_merge(const void *blob, size_t len, json_t **merged, json_t **skipped, pyc_error_t *err);

/* Lets SIGINT be recorded (pyc_py_interrupt_pending) while the main thread waits in C for something other
 * than a cell of its own (an isolated cell's child); disarm clears what it left, with the GIL held. */
void pyc_py_interrupt_arm(void);
void pyc_py_interrupt_disarm(void);

/* Any thread, without the GIL: arms MemoryError(message) for the running cell; the caller then sends SIGINT
 * to the main thread, whose handler raises it (at the cell's next bytecode) instead of KeyboardInterrupt,
 * and in no later cell.  For the memory watch, which runs on the guard thread. */
void pyc_py_raise_memory_error(const char *message);

/* Points Python's faulthandler at fd, for every thread (crash.c reads what it writes there).  GIL held.
 * Returns 0, or -1 with err. */
int pyc_py_faulthandler(int fd, pyc_error_t *err);

/* ---- the debugger (debug.c) ----------------------------------------------------------------------------
 * Unlike the rest of this header, these may be called on any thread without the GIL: each takes it itself. */

/* True when debugpy can be imported (asked once, without importing it). */
bool pyc_py_debugger_available(void);

/* Calls pyc._debugger.func(*args) (args a JSON array, borrowed; NULL for none) and returns its dict result as
 * JSON (a new reference), or NULL with err ("Type: message" of the Python error). */
json_t *pyc_py_debug_call(const char *func, json_t *args, pyc_error_t *err);

/* The rich representation {"data", "metadata"} of the object that `which` names (borrowed; see
 * pyc._debugger.value_of), formatted as the display of a cell's result is; NULL with err when it fails. */
json_t *pyc_py_debug_rich(json_t *which, pyc_error_t *err);

/* A debug session starts (true) or ends: while one is on, each cell first makes pydevd trace the main
 * thread, so that breakpoints in it stop. */
void pyc_py_debug_session(bool on);

/* The connection this process serves, for the cells' %connect_info and %qtconsole (_pyc.connection()): the
 * file a client would connect with (NULL when there is none) and its contents (stolen).  Main thread, when
 * the kernel starts serving and again in a forked session, before any cell runs there; no GIL needed, and
 * no Python code runs (so start-up imports nothing for it). */
void pyc_py_set_connection(const char *path, json_t *info);

/* Runs atexit handlers and finalizes the interpreter.  Must hold the GIL (pyc_py_enter). */
void pyc_py_finalize(void);

/* The end of a process that will _exit without finalizing the interpreter (a forked session: a child of a
 * fork, as multiprocessing's forked workers end): what Py_FinalizeEx does that a user can see, and nothing
 * else.  Non-daemon threads are joined (threading._shutdown), atexit handlers run, the user's namespace
 * (__main__) lets go of its values, as module teardown would, and so do the results kept beside it (Out, _,
 * __, ___), then one collection finds what only cycles held, so that their finalizers run (a file left open
 * is flushed), and sys.stdout and sys.stderr are flushed.  The teardown of every module and the collections
 * that go with it (120 ms in a session with numpy and pandas) are skipped.  Must hold the GIL; the
 * interpreter stays usable. */
void pyc_py_finish(void);

/* Calls module.name(*args) of the pyc package (args a JSON array, not stolen) and returns its result as JSON
 * (a new reference), or NULL after reporting the exception to the log.  Any thread: takes the GIL. */
json_t *pyc_py_support_call(const char *module, const char *name, json_t *args);

/* Imports a module now (an import reads files: each needs a descriptor), reporting a failure to the log.
 * Returns 0 or -1.  Any thread: takes the GIL. */
int pyc_py_preload(const char *module);

#endif
