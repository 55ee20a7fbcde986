/*
 * record.h -- the one record format of the pipes between a kernel and the processes it forks: an isolated
 * cell's child (isolate.c) and a new forked session reporting that it started (fork.c).
 *
 * A record is a header of three uint32 {type, chan, nframes} in host byte order (both ends are the same
 * program on the same machine), then for each frame a uint64 size and the bytes.  Types are the caller's.
 * Writes of up to PIPE_BUF bytes are atomic, larger ones are not: one process writes to a pipe at a time.
 */
#ifndef PYC_RECORD_H
#define PYC_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"

/* The largest frame a reader accepts (an isolated cell's pickle of the names it bound). */
#define PYC_RECORD_MAX_FRAME ((uint64_t)8 << 30)

/* Writes one record.  Returns 0, or -1 when the pipe failed (errno says why). */
int pyc_record_write(int fd, uint32_t type, uint32_t chan, const pyc_frame_t *frames, size_t n);

/* Reads one record: *type, *chan, and *frames, a malloc'd array of *n frames each owning a malloc'd block
 * (form 1 of frame.h; the caller frees the blocks, or hands them to a sender, and the array).  Returns 0, or
 * -1 at end of file, on a read error, or on a record larger than the limits. */
int pyc_record_read(int fd, uint32_t *type, uint32_t *chan, pyc_outframe_t **frames, size_t *n);

/* Frees what pyc_record_read gave. */
void pyc_record_free(pyc_outframe_t *frames, size_t n);

#endif
