/*
 * pyint.h -- what the files of src/py share among themselves (the pyc__py_ names; py.h has the public
 * pyc_py_ ones).  Includes Python.h; never include it outside src/py.
 */
#ifndef PYC_PYINT_H
#define PYC_PYINT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <signal.h>

#include "buf.h"
#include "py.h"

/* The kernel's callbacks, copied at init. */
extern pyc_py_host_t pyc__py_host;

/* State of the cell being run, read by the displayhook and input(). */
typedef struct pyc__py_cell {
    int running;                 /* a cell is executing */
    int silent;
    int allow_stdin;
    int execution_count;
    int plain;                   /* tracebacks without color escapes */
    json_t *payload;             /* payloads of its execute_reply (add_payload), or NULL */
} pyc__py_cell_t;
/* The main shell's cell; and the cell a subshell's thread runs (NULL on every other thread, whose display
 * and input() belong to the main shell's cell).  pyc__py_here() is the cell of the calling thread. */
extern pyc__py_cell_t pyc__py_cell;
extern _Thread_local pyc__py_cell_t *pyc__py_subcell;
static inline pyc__py_cell_t *
pyc__py_here(void)
{
    return pyc__py_subcell != NULL ? pyc__py_subcell : &pyc__py_cell;
}

/* Set by the SIGINT handler while a cell runs. */
extern volatile sig_atomic_t pyc__py_interrupted;
extern volatile sig_atomic_t pyc__py_executing;

/* Just before a main-shell cell's first bytecode, with the GIL: an interrupt that came since the cell was
 * armed is made pending again, so that it reaches the cell even when the kernel's own Python work before it
 * caught the KeyboardInterrupt (a first cell's lazy import of linecache, whose failure is cleared, lost an
 * interrupt sent 20 ms after a kernel started: the cell slept on). */
void pyc__py_interrupt_reassert(void);

/* The finder of the embedded pyc package (init.c); its after_cell() runs after every cell. */
extern PyObject *pyc__py_finder;
/* The Python ident of the main thread (the one pyc_py_init ran on). */
extern unsigned long pyc__py_main_ident;


/* In the SIGINT handler: when a MemoryError was asked for (pyc_py_raise_memory_error), schedules it and
 * returns true (the signal is then no KeyboardInterrupt). */
bool pyc__py_memory_error_on_sigint(void);

/* The _pyc builtin module (streams, displayhook, display, input); registered before init. */
PyObject *pyc__py_module_init(void);
/* After Python's start: large raw blocks from now on are advised onto transparent huge pages (hugepages.c),
 * so that a fork of a big session copies few page-table entries.  Main thread, GIL held. */
void pyc__py_hugepages_install(void);

/* Creates a stream object writing to stdout (0) or stderr (1). */
PyObject *pyc__py_stream_new(int which);
int pyc__py_stream_ready(PyObject *module);

/* Converts a Python value to JSON (dict with str keys, list, tuple, str, int, float, bool, None; anything
 * else by str()).  Returns a new reference, or NULL with a Python error set: ValueError for a reference cycle
 * or nesting deeper than 256 levels (which once overflowed the C stack). */
json_t *pyc__py_to_json(PyObject *obj);

/* Writes the current Python exception as one line "pyc: <what> failed: <ename>: <evalue>" to the cell's
 * stderr and clears it: for failures of the kernel's own helpers (a repr method, a comm callback, the
 * figure flush) that must not become the cell's error. */
void pyc__py_report(const char *what);

/* With the GIL, on a subshell's thread: its cell (token: opts.cell_token) begins (true) or has ended (false).
 * Only cells still running are interrupted (pyc_py_interrupt_cells), and the end clears an interrupt that came
 * too late. */
void pyc__py_in_cell(bool entering, unsigned long token);

/* In a forked child, with the GIL: the parent's debug session is not this process's (no tracing). */
void pyc__py_debug_forget(void);

/* Before a cell, on the main thread with the GIL: makes the debugger trace it while a debug session is on. */
void pyc__py_debug_trace(void);

/* True while a debug session is on (pyc_py_debug_session): every cell's source is then kept (exec.c). */
bool pyc__py_debugging(void);

/* Converts JSON to Python objects; a new reference or NULL with a Python error set. */
PyObject *pyc__py_from_json(json_t *j);

/* The MIME bundle of obj as two dicts: data (MIME type -> value, at least text/plain; binary types as base64
 * text) and metadata, both new references, their values written as JSON when the message is.  Returns 0; or
 * 1 when obj displayed itself (its _ipython_display_ ran, when self_display is true) and *data and *metadata
 * are NULL; or -1 with a Python error set. */
int pyc__py_format(PyObject *obj, bool self_display, PyObject **data, PyObject **metadata);

/* The bundle of obj (never displaying itself) as JSON: data, and metadata in *metadata; NULL with a Python
 * error set. */
json_t *pyc__py_format_json(PyObject *obj, json_t **metadata);

/* Appends obj as JSON text to b, by the rules of pyc__py_to_json.  Returns 0, or -1 with a Python error set
 * and b as it was. */
int pyc__py_json_text(pyc_buf_t *b, PyObject *obj);

/* The function module.name of the kernel's Python package (pyc._shell.pre_cell, pyc._pretty.pretty, ...),
 * imported and looked up once (module and name must be string literals): a borrowed reference, or NULL with a
 * Python error set. */
PyObject *pyc__py_support(const char *module, const char *name);

/* Calls that function (pyc__py_support) with no arguments: its result, a new reference, or NULL after the
 * exception was reported to the log as raised while doing `what` (pyc__py_report).  With the GIL. */
PyObject *pyc__py_call_support(const char *module, const char *name, const char *what);

/* Compiles and runs a cell under filename (cell.c): code, which was made from the cell's text (the same text,
 * or the text after the IPython-style transforms, which keep its lines where they were), with its source
 * registered in linecache.  Unless silent, a last expression statement goes through sys.displayhook.
 * *lasting is set when the cell's code defines code objects that may run after it.  Returns 0, -1 when it
 * raised (Python error set), or -2 when it did not parse (a SyntaxError is set and no code ran). */
int pyc__py_run_cell(const char *code, PyObject *filename, PyObject *globals, bool silent, bool *lasting);

/* True when linecache holds filename's lines or a cell was noted under it: the name is not new to the cell
 * about to run, so what registered it before may still need it after. */
bool pyc__py_cell_source_known(PyObject *filename);

/* Drops what pyc__py_run_cell registered, and pyc__py_note_cell noted, for a cell that nothing can ask
 * about any more. */
void pyc__py_cell_forget_source(PyObject *filename);

/* Notes the execution count of the cell compiled under filename, for tracebacks (error.c). */
void pyc__py_note_cell(PyObject *filename, int execution_count);

/* True when a cell was noted under filename and not forgotten since. */
bool pyc__py_cell_noted(PyObject *filename);

/* Forgets the cell noted under filename: for a cell none of whose frames can show in a later traceback. */
void pyc__py_forget_cell(PyObject *filename);

/* Formats the current Python exception as {"ename", "evalue", "traceback"} and clears it.  Frames before
 * the first frame of a cell are dropped from the traceback. */
json_t *pyc__py_error_content(void);

/* Buffers shared with ZeroMQ without a copy (zerocopy.c).  All with the GIL held.
 * pyc__py_lend makes *frame a self-contained outgoing frame from the bytes of obj (a contiguous bytes-like
 * object): from 64 KiB on they are lent (a buffer export kept until ZeroMQ is done with them), smaller ones
 * are copied.  Returns 0, or -1 with a Python error set (*frame is then empty).
 * pyc__py_release_lent releases the exports ZeroMQ has given back; cheap when there are none.
 * pyc__py_msg_buffers returns a new list with a writable memoryview of each of msg's buffers, sharing the
 * received memory from 64 KiB on (copied below, or when the storage cannot be held), or NULL with an error.
 * pyc__py_zerocopy_ready adds _pyc.FrameBuffer to the module; returns 0 or -1 with an error. */
int pyc__py_lend(PyObject *obj, pyc_outframe_t *frame);
void pyc__py_release_lent(void);
PyObject *pyc__py_msg_buffers(const pyc_msg_t *msg);
int pyc__py_zerocopy_ready(PyObject *module);

/* ipyinput.c: pyc__py_ipyinput_ready adds _pyc.automagic_names (a set of the line magics a one-line cell may
 * name without its '%') to the module; 0, or -1 with a Python error.  pyc__py_ipython_input is true when the
 * cell must pass pyc._transform before it is compiled although it may parse (pasted prompts, an automagic
 * line); GIL held. */
int pyc__py_ipyinput_ready(PyObject *module);
bool pyc__py_ipython_input(const char *code);

/* Methods of the _pyc module defined in display.c and exec.c. */
extern PyMethodDef pyc__py_display_methods[];
extern PyMethodDef pyc__py_input_methods[];
extern PyMethodDef pyc__py_async_methods[];

/* Runs a cell's code objects (a list) in globals on the kernel's asyncio loop, awaiting those that are
 * coroutines (async.c).  Returns 0, or -1 with a Python error set. */
int pyc__py_run_async(PyObject *codes, PyObject *globals);

/* With the GIL, on the main thread, before a cell: once the kernel's asyncio loop exists, makes it the current
 * loop again (asyncio.run() in an earlier cell leaves none), so that asyncio.get_event_loop() in the cell is
 * the kernel's.  Nothing to do, and one atomic load, for a kernel that never imported asyncio. */
void pyc__py_async_current(void);

#endif
