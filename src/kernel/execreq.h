/*
 * execreq.h -- an execute_request, decoded once: what its content and its metadata.pyc ask for, with the
 * protocol's defaults applied in one place, for every reader (dispatch, the snapshot hook, the journal,
 * execute.c, isolation and every shell).
 *
 * Before this type each reader looked the members up itself, and two readers already disagreed (a subshell
 * took a missing allow_stdin as false, the main shell as true: now false on every shell, as in ipykernel).
 * The decoder is pure: no kernel, no Python, no clock, no I/O; it borrows from the request's JSON and
 * allocates nothing, so a decoded request lives as long as the message it was decoded from.  It is fuzzed
 * (tests/fuzz/fuzz_execreq.c) and unit-tested (tests/unit/kernel/test_execreq.c).
 *
 * Defaults (the messaging spec's, as ipykernel applies them): silent false; store_history true, and false
 * whenever silent is true; stop_on_error true; allow_stdin false (jupyter_client always sends it; a client
 * that does not may not read stdin either, and must not be asked); user_expressions none; a member of the
 * wrong type counts as absent, as ipykernel's `content.get(...)` with a truthiness test would take it,
 * except `code`, which must be a string, and metadata.pyc, whose limits and isolation are refused when
 * malformed (a client that asked for a limit or for isolation must not get a cell run without it).
 */
#ifndef PYC_EXECREQ_H
#define PYC_EXECREQ_H

#include <jansson.h>
#include <stdbool.h>

#include "error.h"
#include "limit.h"

typedef struct pyc_execreq {
    /* The code as sent (history and execute_input keep it whole), and its JSON string (borrowed). */
    json_t *source_v;
    const char *source;
    /* The code that runs: the source less a first line of %%isolate or %%transaction (both, in that order,
     * when both are there); points into source. */
    const char *code;
    bool silent;
    bool store_history;          /* false whenever silent */
    bool stop_on_error;
    bool allow_stdin;
    json_t *user_expressions;    /* borrowed; NULL when absent or not an object */
    int color;                   /* metadata.pyc.color: 1 true, 0 false, -1 not given (the kernel decides) */
    bool pace;                   /* metadata.pyc.pace is not false (publish.c's reply pacing) */
    pyc_cell_limits_t limits;    /* the kernel's, tightened by metadata.pyc's (pyc_limits_for_cell) */
    bool isolated;               /* metadata.pyc.isolate == "fork", or a first line %%isolate [SECONDS] */
    double isolate_timeout;      /* the %%isolate line's seconds; 0: none */
    bool transaction;            /* metadata.pyc.transaction true, or a first line %%transaction */
    json_t *snapshot;            /* metadata.pyc.snapshot when it is true or a name (borrowed); else NULL */
    /* NULL when the request can run; else why it cannot (points into why). */
    const char *refused;
    pyc_error_t why;
} pyc_execreq_t;

/* Decodes an execute_request's content and metadata (either may be NULL) against the kernel's limits.
 * Returns 0, or -1 with r->refused saying why the request cannot run (no string code, malformed
 * metadata.pyc, a misspelt isolation); *r is filled as far as it could be read in both cases, with the
 * defaults elsewhere, so that a refusal is still answered as the request asked (silent or not). */
int pyc_execreq_decode(pyc_execreq_t *r, json_t *content, json_t *metadata, const pyc_limits_t *kernel);

/* The request's silent member with its default (false): for a reader that needs nothing else (the control
 * thread's journal entry of a queued request). */
bool pyc_execreq_silent(json_t *content);

#endif
