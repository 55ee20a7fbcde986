/*
 * journal.h -- the kernel's record of its recent cells, for clients that come back later: `pyc fire` starts a
 * cell and leaves, `pyc poll` (or any Jupyter client, by the execute_request's msg_id) asks afterwards what
 * became of it.  Each execute_request that is not silent is kept by its msg_id with its state (queued,
 * running, done), its output messages up to a cap, and its execute_reply (content and metadata).
 *
 * The journal is fed from the send path (every output and reply the kernel sends passes pyc_journal_tap) and
 * read by the control thread (journal_request), so that a client can read it while another cell runs; one
 * mutex guards it, held only for copies.  Bounds: at most `cells` records (the oldest done one goes first),
 * at most `cell_bytes` of output contents per cell (later messages are counted, not kept), and at most
 * `total_bytes` of outputs in all (the outputs of the oldest done cells are dropped first; their records
 * stay).  Outputs are kept as the JSON text the kernel sent, so that a report splices them without parsing.
 */
#ifndef PYC_JOURNAL_H
#define PYC_JOURNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct pyc_journal pyc_journal_t;

typedef struct pyc_journal_limits {
    size_t cells;                /* records kept; 0 turns the journal off */
    size_t cell_bytes;           /* output contents kept per cell */
    size_t total_bytes;          /* output contents kept in all */
} pyc_journal_limits_t;

#define PYC_JOURNAL_CELLS 256
#define PYC_JOURNAL_CELL_BYTES (1u << 20)
#define PYC_JOURNAL_TOTAL_BYTES (16u << 20)

/* The default limits, each replaced by its environment variable when that holds a whole number:
 * PYC_JOURNAL_CELLS, PYC_JOURNAL_CELL_BYTES, PYC_JOURNAL_BYTES. */
void pyc_journal_limits_from_env(pyc_journal_limits_t *lim);

/* A new, empty journal; NULL when lim->cells is 0 (off) or memory ran out.  Every function below accepts a
 * NULL journal and then does nothing (reports say so). */
pyc_journal_t *pyc_journal_new(const pyc_journal_limits_t *lim);
void pyc_journal_free(pyc_journal_t **j_p);

/* Held across fork() by the kernel's fork handlers (kernel.c), so that a child never copies the list while
 * another thread changes it.  NULL-safe. */
void pyc_journal_lock(pyc_journal_t *j);
void pyc_journal_unlock(pyc_journal_t *j);

/* In a forked session: the records of cells that are not done are the parent's to finish (its subshells'
 * cells, its inbox's fired cells), never this process's; they are dropped, so that no poll waits for them. */
void pyc_journal_after_fork(pyc_journal_t *j);

/* A client announced cell `id` (it sent the execute_request and will not wait for it): recorded as queued
 * unless the journal knows it already.  Returns 0, or -1 when memory ran out. */
int pyc_journal_expect(pyc_journal_t *j, const char *id);

/* Cell `id` starts: its request's header frame (hdr, hlen) is how its outputs and reply are recognized, and
 * count its execution_count. */
void pyc_journal_begin(pyc_journal_t *j, const char *id, const void *hdr, size_t hlen, int count);

/* A message the kernel sends, given its type, its parent header frame, and its metadata and content texts
 * (metadata may be NULL).  Outputs of a running cell (stream, display_data, update_display_data,
 * execute_result, error, clear_output) are kept; an execute_reply ends its cell.  Anything else, and
 * messages of requests the journal does not hold, cost a length comparison. */
void pyc_journal_tap(pyc_journal_t *j, const char *msg_type, const void *parent, size_t plen,
                     const char *metadata, const char *content, size_t len);

/* The content of a journal_reply, as JSON text (malloc'd, *len its length; NULL when memory ran out):
 * {"status": "ok", "cells": [...], "limits": {...}}.  ids (a JSON array of strings, borrowed) selects
 * cells, in that order, an unknown one as {"id", "state": "unknown"}, a record named twice only the first
 * time (so that a reply is never larger than the journal); NULL lists every record, oldest first.
 * Each cell: id, state, execution_count, queued/started/ended (Unix seconds, those that happened), and with
 * outputs: "outputs" ([{"type", "content"}...]), "outputs_dropped" (messages not kept), and once done,
 * "reply" ({"content", "metadata"}). */
char *pyc_journal_report(pyc_journal_t *j, json_t *ids, bool outputs, size_t *len);

/* Late outputs: what the threads of a cell published after the cell's reply, which no client waiting for the
 * cell saw (a notebook shows them under the cell; a `pyc run` of the cell had ended).  They are kept with the
 * cell's other outputs (its cap and the journal's total bound apply) and reported by pyc_journal_report too.
 * pyc_journal_late_unseen: how many have not been handed out yet, over every done record.
 * pyc_journal_report_late: the content of a journal_reply to {"late": true}, {"status": "ok", "cells": [{"id",
 * "execution_count", "late": [{"type", "content"}...]}...]} of the records with late outputs not handed out
 * yet, oldest first; each is handed out once (the next report has only newer ones).  NULL when memory ran
 * out. */
size_t pyc_journal_late_unseen(pyc_journal_t *j);
char *pyc_journal_report_late(pyc_journal_t *j, size_t *len);

#endif
