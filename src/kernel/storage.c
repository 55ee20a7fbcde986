/*
 * storage.c -- the kernel's stores as its files use them: the history (opened on first use, its rows handed
 * to the writer thread, persist.h) and the session's checkpoint (made on first use, checkpoint.h).  Each is
 * opened lazily because a kernel that never runs a cell must not pay for it (SQLite costs 1.2 MB of resident
 * memory and some start-up time once a database is open).  A bottom file of src/kernel: it calls none of the
 * others, so that execute.c, handlers.c, snapshot.c, lifelog.c, dispatch.c and kernel.c can all use it
 * without a circle.
 */
#include "kernelint.h"

#include <stdlib.h>

#include "log.h"

pyc_history_t *
pyc__history(pyc_kernel_t *k)
{
    /* Opened on first use: SQLite costs a kernel 1.2 MB of resident memory and some start-up time once a
     * database is open, which a kernel that never runs a cell should not pay. */
    if (!k->store.history_tried) {
        pyc_error_t herr;
        k->store.history_tried = true;
        k->store.history = pyc_history_open_default(&herr);
        if (k->store.history == NULL)
            pyc_log("history is off: %s", herr.text);
        else if (k->store.history_continue > 0 &&
                 pyc_history_continue(k->store.history, k->store.history_continue, &herr) < 0)
            pyc_log("%s", herr.text);
        pyc_persist_attach(k->store.persist, k->store.history);
    }
    return k->store.history;
}

void
pyc__history_kick(pyc_kernel_t *k, bool idle)
{
    if (k->store.history_unkicked == 0)
        return;
    if (k->store.history_unkicked < PYC__HISTORY_BATCH_CELLS) {
        pyc_persist_kick_lazy(k->store.persist);
        /* Going idle, the rows are asked for: the next requests need not ask again (a request that runs no
         * cell must not wake the writer).  Within a burst the count goes on, for the batch of 100. */
        if (idle)
            k->store.history_unkicked = 0;
        return;
    }
    k->store.history_unkicked = 0;
    pyc_persist_kick(k->store.persist);
}

pyc_checkpoint_t *
pyc__checkpoint(pyc_kernel_t *k)
{
    /* Made on first use: the interpreter's version goes into the file's header. */
    if (k->store.checkpoint == NULL && k->store.checkpoint_dir != NULL) {
        pyc_error_t err;
        /* The first one of a kernel also removes files old enough to go (PYC_CHECKPOINT_MAX_AGE). */
        double age = PYC_CHECKPOINT_MAX_AGE;
        const char *v = getenv("PYC_CHECKPOINT_MAX_AGE");
        if (v != NULL && v[0] != '\0' && pyc_limits_parse_seconds(v, &age, &err) < 0)
            pyc_log("PYC_CHECKPOINT_MAX_AGE: %s", err.text);
        int gone = pyc_checkpoint_expire(k->store.checkpoint_dir, age, &err);
        if (gone > 0)
            pyc_log("removed %d checkpoint file%s older than %g days", gone, gone == 1 ? "" : "s", age / 86400);
        k->store.checkpoint = pyc_checkpoint_new(k->store.checkpoint_dir, k->store.session_id, pyc_py_version(), &err);
        if (k->store.checkpoint != NULL) {
            size_t cell = PYC_CHECKPOINT_MAX_CELL, bytes = PYC_CHECKPOINT_MAX_BYTES;
            v = getenv("PYC_CHECKPOINT_MAX_CELL");
            if (v != NULL && v[0] != '\0' && pyc_limits_parse_bytes(v, &cell, &err) < 0)
                pyc_log("PYC_CHECKPOINT_MAX_CELL: %s", err.text);
            v = getenv("PYC_CHECKPOINT_MAX_BYTES");
            if (v != NULL && v[0] != '\0' && pyc_limits_parse_bytes(v, &bytes, &err) < 0)
                pyc_log("PYC_CHECKPOINT_MAX_BYTES: %s", err.text);
            pyc_checkpoint_set_caps(k->store.checkpoint, cell, bytes);
        }
        if (k->store.checkpoint == NULL) {
            pyc_log("%s; checkpoints are off", err.text);
            free(k->store.checkpoint_dir);
            k->store.checkpoint_dir = NULL;
        }
    }
    return k->store.checkpoint;
}

void
pyc__checkpoint_cell(pyc_kernel_t *k, int count, const char *code)
{
    pyc_error_t err;
    if (pyc__checkpoint(k) == NULL)
        return;
    if (pyc_checkpoint_add(k->store.checkpoint, count, code, &err) < 0) {
        if (!k->store.checkpoint_failed)
            pyc_log("%s (checkpoints are off until it works)", err.text);
        k->store.checkpoint_failed = true;
    } else {
        k->store.checkpoint_failed = false;
    }
}

void
pyc__history_add(pyc_kernel_t *k, int count, const char *code)
{
    pyc_error_t err;
    if (pyc__history(k) == NULL)
        return;
    if (pyc_history_queue(k->store.history, count, code, &err) < 0) {
        pyc_log("%s", err.text);
        return;
    }
    k->store.history_unkicked++;
}

json_t *
pyc__history_answer(pyc_kernel_t *k, json_t *request)
{
    /* The answer includes the cells still queued: the client asked, so a lock is worth waiting for.  The
     * writer thread is held off meanwhile: the connection is one thread's at a time. */
    pyc_error_t err;
    pyc_history_t *h = pyc__history(k);
    pyc_persist_hold(k->store.persist);
    if (pyc_history_flush(h, 200, &err) < 0)
        pyc_log("%s", err.text);
    json_t *content = pyc_history_request(h, request);
    pyc_persist_release(k->store.persist);
    return content;
}

void
pyc__history_write_out(pyc_kernel_t *k)
{
    pyc_history_t *h = k->store.history;
    if (h == NULL)
        return;
    pyc_error_t herr;
    pyc_persist_hold(k->store.persist);
    if (pyc_history_flush(h, 1000, &herr) < 0)
        pyc_log("%s", herr.text);
    pyc_persist_release(k->store.persist);
}

int
pyc__history_session_of(pyc_kernel_t *k)
{
    return k->store.history != NULL ? pyc_history_session(k->store.history) : k->store.history_continue;
}

const char *
pyc__checkpoint_path_if_made(pyc_kernel_t *k)
{
    return k->store.checkpoint != NULL ? pyc_checkpoint_path(k->store.checkpoint) : NULL;
}

bool
pyc__checkpoint_has_cells(pyc_kernel_t *k)
{
    return k->store.checkpoint != NULL && pyc_checkpoint_has_cells(k->store.checkpoint);
}

void
pyc__store_resumed(pyc_kernel_t *k, int history_session, const char *checkpoint, int held)
{
    k->store.history_continue = history_session;
    pyc_error_t err;
    if (pyc__checkpoint(k) != NULL && pyc_checkpoint_restored(k->store.checkpoint, checkpoint, held, &err) < 0)
        pyc_log("%s", err.text);
}

void
pyc__store_fork(pyc_kernel_t *k, int phase)
{
    if (phase == PYC__FORK_PREPARE)
        pyc_persist_fork_prepare(k->store.persist);   /* the writer is not inside SQLite nor between buffer and file */
    else if (phase == PYC__FORK_PARENT)
        pyc_persist_fork_parent(k->store.persist);
    else
        pyc_persist_after_fork_child(k->store.persist);   /* its thread is the parent's: kicks do nothing here */
}
