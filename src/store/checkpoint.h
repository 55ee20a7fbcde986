/*
 * checkpoint.h -- a session's successful cells, as a plain Python file that can be replayed into a new kernel.
 *
 * Every cell that ran without error and was not silent is appended, in order, to one file per session:
 *     <Jupyter data dir>/pyc/checkpoints/<kernel id>.py          (mode 0600, made when the kernel starts;
 *                                                                 <kernel id>-2.py... when the name is taken)
 * The file is Python in the "percent" cell format that editors (VS Code, Jupytext) open as a notebook:
 *     # pyc checkpoint 1 3f9c0a1b2c3d4e5f
 *     # kernel kernel-1234..., started 2026-12-02T15:04:05.000000Z, Python 3.11.2
 *     # ... (how to replay; a warning that it holds whatever was typed, secrets included)
 *
 *     # %% pyc 3f9c0a1b2c3d4e5f In[1] 2026-12-02T15:04:07.123456Z
 *     import numpy as np
 *
 * A restore (README, "Time travel") adds a line "# %% pyc TOKEN restore In[N] DATE" and a comment: a replay
 * then leaves out the cells above it whose count is past N, which the restore undid.
 *
 * The random token on every cell marker is what replay splits on, so that a line "# %%" inside a cell's own
 * code cannot cut it in two.
 *
 * Bounds (a 200 MB cell once made a 200 MB file): a cell larger than PYC_CHECKPOINT_MAX_CELL (1 MiB) is kept
 * as a line that stops a replay there and says why; once the file reaches PYC_CHECKPOINT_MAX_BYTES (64 MiB)
 * one such line ends it.  Files older than PYC_CHECKPOINT_MAX_AGE (30 days) are removed when a kernel starts
 * (pyc_checkpoint_expire).  The environment variables of the same names change them.  IPython-style lines
 * (!cmd, %time) are kept as typed; replay runs each cell through the kernel's own executor, which understands
 * them.
 */
#ifndef PYC_CHECKPOINT_H
#define PYC_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

typedef struct pyc_checkpoint pyc_checkpoint_t;

#define PYC_CHECKPOINT_MAX_CELL ((size_t)1 << 20)
#define PYC_CHECKPOINT_MAX_BYTES ((size_t)64 << 20)
#define PYC_CHECKPOINT_MAX_AGE (30.0 * 86400)

/* A checkpoint for the session `id` (a file name stem: [A-Za-z0-9_.-], others become '_') in dir: creates
 * the directory and a new file holding the header.  Returns NULL with err. */
pyc_checkpoint_t *pyc_checkpoint_new(const char *dir, const char *id, const char *python_version,
                                     pyc_error_t *err);

/* Appends one cell.  Returns 0, or -1 with err (a full disk, say; the caller logs it once). */
int pyc_checkpoint_add(pyc_checkpoint_t *c, int execution_count, const char *code, pyc_error_t *err);

/* Sets the largest cell and the largest file (0: no bound). */
/* A restore (README, "Time travel"): this kernel goes on with the checkpoint file path (the kernel it
 * replaces wrote it; NULL: its own), and writes a line there that makes a replay leave out the cells recorded
 * after In[count] (the state it went back to).  Returns 0, or -1 with err. */
int pyc_checkpoint_restored(pyc_checkpoint_t *c, const char *path, int count, pyc_error_t *err);

void pyc_checkpoint_set_caps(pyc_checkpoint_t *c, size_t max_cell, size_t max_bytes);

/* Removes the checkpoint files (*.py) in dir not written for more than max_age seconds.  Returns how many
 * went, or -1 with err when dir cannot be read. */
int pyc_checkpoint_expire(const char *dir, double max_age, pyc_error_t *err);

/* The file's path. */
const char *pyc_checkpoint_path(const pyc_checkpoint_t *c);

/* True when the file holds a cell that a replay runs, as far as this process knows: one it added, one it
 * replayed, one its parent's file held at a fork; after a restore, when the state went back to a cell.  Reads
 * no file and takes no lock (the crash reporter asks it).  NULL-safe. */
bool pyc_checkpoint_has_cells(const pyc_checkpoint_t *c);

/* In a forked session: makes c a new session's checkpoint at dir/id that starts with every cell the parent's
 * file held at the fork (copied now), and closes the inherited descriptor.  Returns 0, or -1 with err. */
int pyc_checkpoint_fork(pyc_checkpoint_t *c, const char *dir, const char *id, pyc_error_t *err);

void pyc_checkpoint_destroy(pyc_checkpoint_t **c_p);

/* Splits the text of a checkpoint file into its cells' code (trailing blank lines removed).  Returns 0 with
 * *cells a malloc'd array of *n malloc'd strings (free with pyc_checkpoint_free_cells), or -1 with err when
 * the text is not a pyc checkpoint. */
int pyc_checkpoint_parse(const char *text, size_t len, char ***cells, size_t *n, pyc_error_t *err);

/* Reads and parses a file (at most 256 MiB). */
int pyc_checkpoint_load(const char *path, char ***cells, size_t *n, pyc_error_t *err);

void pyc_checkpoint_free_cells(char **cells, size_t n);

#endif
