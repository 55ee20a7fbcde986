/*
 * limit.h -- the session limits a kernel keeps (DESIGN.md section 6), and their parsing.
 *
 * Every limit is off (0) unless set.  They come from three places, later ones winning:
 *   1. PYC_* environment variables (so a kernelspec's "env" can set them),
 *   2. pyc-kernel options (--idle-timeout=30s ...),
 *   3. for the per-cell limits, an execute_request's metadata {"pyc": {"timeout": S, "cpu": S, "output_limit": B,
 *      "output_messages": N}} -- which may only tighten what the kernel was started with, never loosen it:
 *      the host that starts the kernel sets the bounds, and a client inside them cannot lift them.
 *
 * Durations are seconds with an optional unit: "90", "1.5", "250ms", "30s", "5m", "2h".  Sizes are bytes
 * with an optional binary unit: "4096", "512K", "100M", "2G" (also "KiB", "MB"... read as powers of 1024);
 * a count of messages or of open files is a whole number.
 * This module does no I/O beyond getenv and is a fuzz target (tests/fuzz/fuzz_limit.c).
 */
#ifndef PYC_LIMIT_H
#define PYC_LIMIT_H

#include <jansson.h>
#include <stddef.h>

#include "error.h"

typedef struct pyc_limits {
    double idle_timeout;         /* s without a request before a clean shutdown */
    double lifetime;             /* s after start before a clean shutdown (a running cell is stopped) */
    double shutdown_grace;       /* s the closing shutdown (atexit, finalization) may take; default 10 */
    double cell_timeout;         /* s a cell may run before it is interrupted */
    double cell_grace;           /* s an interrupted cell has to stop before the kernel ends; default 5 */
    size_t output_bytes;         /* bytes of output per cell */
    size_t output_messages;      /* output messages per cell */
    size_t memory;               /* bytes of address space the session may add after start-up */
    size_t event_output;         /* bytes of a cell's output its cell_done event carries (lifelog.c); 0: none */
    double cell_cpu;             /* CPU seconds (the kernel process's, all threads) a cell may spend */
    size_t open_files;           /* descriptors the session may open beyond the kernel's own (filecap.c) */
} pyc_limits_t;

/* The most of a cell's output a cell_done event may carry: escaped as JSON (up to 6 bytes a byte), it stays
 * well inside a line of the event log (PYC_EVENTS_MAX_LINE), and a log of 1 MiB still holds hundreds of
 * cells. */
#define PYC_LIMITS_EVENT_OUTPUT_MAX ((size_t)4096)

/* The limits of one cell: the kernel's, tightened by the request's metadata. */
typedef struct pyc_cell_limits {
    double timeout;
    double cpu;                  /* CPU seconds; 0: none */
    size_t output_bytes;
    size_t output_messages;
} pyc_cell_limits_t;

/* The default cell grace, in seconds. */
#define PYC_LIMITS_DEFAULT_GRACE 5.0

/* The output cap of every kernel that is not told otherwise (PYC_OUTPUT_LIMIT, --output-limit; 0 turns it off):
 * 32 MiB of output per cell (and between two cells), so that a cell that prints in a loop cannot make the
 * browser's tab, which keeps every output, use gigabytes and freeze (JupyterLab slows down well before
 * that), while a big figure, an interactive plot's script or a table of many thousand rows still fits.  No
 * deadline and no lifetime by default: a notebook's cells may rightly run for hours (`pyc new` gives its
 * sessions those; README, "Limits of a session"). */
#define PYC_LIMITS_DEFAULT_OUTPUT ((size_t)32 << 20)

/* The default shutdown grace, in seconds: a non-daemon thread or an atexit handler that never returns must
 * not keep a kernel alive for ever after it was asked to shut down.  0 (--shutdown-grace=0) waits for ever. */
#define PYC_LIMITS_DEFAULT_SHUTDOWN_GRACE 10.0

/* How long a completion, inspection or is_complete request may run user code (a property, __getattr__, a
 * custom __dir__) before it is interrupted, unless the kernel's cell deadline is tighter. */
#define PYC_LIMITS_REQUEST_TIMEOUT 10.0


/* One limit's names: the option (without "--"), the environment variable, and what it is. */
typedef struct pyc_limit_desc {
    const char *option;
    const char *env;
    const char *help;
} pyc_limit_desc_t;

/* The table of limits, ended by an entry whose option is NULL. */
extern const pyc_limit_desc_t pyc_limit_descs[];

/* Sets *l to all-off, with the default cell and shutdown graces. */
void pyc_limits_init(pyc_limits_t *l);

/* Parses a duration into seconds (>= 0, finite).  Returns 0, or -1 with err. */
int pyc_limits_parse_seconds(const char *text, double *out, pyc_error_t *err);

/* Parses a size into bytes.  Returns 0, or -1 with err. */
int pyc_limits_parse_bytes(const char *text, size_t *out, pyc_error_t *err);

/* Sets the limit named by its option name ("idle-timeout", ...) from text.  Returns 0, or -1 with err
 * (unknown name or bad value). */
int pyc_limits_set(pyc_limits_t *l, const char *option, const char *text, pyc_error_t *err);

/* Reads every PYC_* variable of the table that is set and not empty.  Returns 0, or -1 with err naming
 * the first bad one. */
int pyc_limits_from_env(pyc_limits_t *l, pyc_error_t *err);

/* The limits as a JSON object of the options that are set, in seconds and bytes (a new reference). */
json_t *pyc_limits_to_json(const pyc_limits_t *l);

/* The tighter of two durations, where 0 means none. */
double pyc_limits_tighter(double a, double b);

/* Computes a cell's limits from the kernel's and the request's metadata.pyc (may be NULL).  A bad value in
 * the metadata is an error (-1 with err) so that the client learns of it instead of running unbounded. */
int pyc_limits_for_cell(const pyc_limits_t *l, json_t *pyc_metadata, pyc_cell_limits_t *out, pyc_error_t *err);

#endif
