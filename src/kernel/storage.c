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
    if (!k->history_tried) {
        pyc_error_t herr;
        k->history_tried = true;
        k->history = pyc_history_open_default(&herr);
        if (k->history == NULL)
            pyc_log("history is off: %s", herr.text);
        else if (k->history_continue > 0 && pyc_history_continue(k->history, k->history_continue, &herr) < 0)
            pyc_log("%s", herr.text);
        pyc_persist_attach(k->persist, k->history);
    }
    return k->history;
}

void
pyc__history_kick(pyc_kernel_t *k, bool idle)
{
    if (k->history_unkicked == 0)
        return;
    if (k->history_unkicked < PYC__HISTORY_BATCH_CELLS) {
        pyc_persist_kick_lazy(k->persist);
        /* Going idle, the rows are asked for: the next requests need not ask again (a request that runs no
         * cell must not wake the writer).  Within a burst the count goes on, for the batch of 100. */
        if (idle)
            k->history_unkicked = 0;
        return;
    }
    k->history_unkicked = 0;
    pyc_persist_kick(k->persist);
}

pyc_checkpoint_t *
pyc__checkpoint(pyc_kernel_t *k)
{
    /* Made on first use: the interpreter's version goes into the file's header. */
    if (k->checkpoint == NULL && k->checkpoint_dir != NULL) {
        pyc_error_t err;
        /* The first one of a kernel also removes files old enough to go (PYC_CHECKPOINT_MAX_AGE). */
        double age = PYC_CHECKPOINT_MAX_AGE;
        const char *v = getenv("PYC_CHECKPOINT_MAX_AGE");
        if (v != NULL && v[0] != '\0' && pyc_limits_parse_seconds(v, &age, &err) < 0)
            pyc_log("PYC_CHECKPOINT_MAX_AGE: %s", err.text);
        int gone = pyc_checkpoint_expire(k->checkpoint_dir, age, &err);
        if (gone > 0)
            pyc_log("removed %d checkpoint file%s older than %g days", gone, gone == 1 ? "" : "s", age / 86400);
        k->checkpoint = pyc_checkpoint_new(k->checkpoint_dir, k->session_id, pyc_py_version(), &err);
        if (k->checkpoint != NULL) {
            size_t cell = PYC_CHECKPOINT_MAX_CELL, bytes = PYC_CHECKPOINT_MAX_BYTES;
            v = getenv("PYC_CHECKPOINT_MAX_CELL");
            if (v != NULL && v[0] != '\0' && pyc_limits_parse_bytes(v, &cell, &err) < 0)
                pyc_log("PYC_CHECKPOINT_MAX_CELL: %s", err.text);
            v = getenv("PYC_CHECKPOINT_MAX_BYTES");
            if (v != NULL && v[0] != '\0' && pyc_limits_parse_bytes(v, &bytes, &err) < 0)
                pyc_log("PYC_CHECKPOINT_MAX_BYTES: %s", err.text);
            pyc_checkpoint_set_caps(k->checkpoint, cell, bytes);
        }
        if (k->checkpoint == NULL) {
            pyc_log("%s; checkpoints are off", err.text);
            free(k->checkpoint_dir);
            k->checkpoint_dir = NULL;
        }
    }
    return k->checkpoint;
}
