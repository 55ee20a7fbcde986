/*
 * stream.h -- stdout and stderr of the kernel process, turned into `stream` messages.
 *
 * Two sources feed each stream: Python's sys.stdout/sys.stderr objects (pyc_streams_write) and, once
 * pyc_streams_capture_fds has replaced file descriptors 1 and 2 with pipes, everything written at the
 * descriptor level (C printf, os.system, child processes).  Both append to one pending buffer per stream,
 * under one lock, and a Python-level write first drains its pipe, so the order that a cell produced its
 * output is the order the client sees.  Writing to one stream publishes what the other has pending first.
 *
 * Pending text is published (through the callback given at creation) when
 *   1) it reaches PYC_STREAM_CHUNK bytes, by the writer itself, so memory stays bounded;
 *   2) it has waited PYC_STREAM_FLUSH_MS, by the flusher thread;
 *   3) pyc_streams_flush is called (before an execute_result, an error, a display, or idle).
 * Text is cut only between UTF-8 characters.  The publish callback runs with the streams lock held, which
 * is what keeps chunks in order; it must not call back into this module.
 */
#ifndef PYC_STREAM_H
#define PYC_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define PYC_STREAM_CHUNK (1u << 20)
#define PYC_STREAM_FLUSH_MS 20

enum { PYC_STDOUT = 0, PYC_STDERR = 1 };

/* Publishes n bytes of valid UTF-8 text of stream `which`.  Called with the streams lock held. */
typedef void (*pyc_stream_publish_fn)(void *ctx, int which, const char *text, size_t n);

typedef struct pyc_streams pyc_streams_t;

/* Creates the streams and starts the flusher thread.  The calling thread's signal mask is inherited by the
 * thread, so create it with SIGINT blocked. */
pyc_streams_t *pyc_streams_new(pyc_stream_publish_fn publish, void *ctx, pyc_error_t *err);

/* Replaces fds 1 and 2 with pipes read by the flusher thread.  The original descriptors are restored by
 * pyc_streams_destroy. */
int pyc_streams_capture_fds(pyc_streams_t *s, pyc_error_t *err);

/* Appends n bytes to a stream.  Thread-safe. */
void pyc_streams_write(pyc_streams_t *s, int which, const char *data, size_t n);

/* Drains the pipes and publishes everything pending on both streams.  Thread-safe. */
void pyc_streams_flush(pyc_streams_t *s);

/* While discarding, output of both streams is dropped (silent cells).  Flush before turning it on. */
void pyc_streams_set_discard(pyc_streams_t *s, bool discard);

/* In a forked child (an isolated cell's, or one of user code): writes go to fds 1 and 2 (the parent's pipes),
 * a whole line at a time (and whatever is left on pyc_streams_flush), so that the parent publishes the
 * child's output, Python-level and fd-level alike, in the order it was written, and lines of concurrent
 * children do not interleave. */
void pyc_streams_set_passthrough(pyc_streams_t *s);

/* Holds the streams lock across fork(), so that the child never inherits it locked by the flusher. */
void pyc_streams_lock(pyc_streams_t *s);
void pyc_streams_unlock(pyc_streams_t *s);

/* In a forked child: forgets the streams inherited from the parent without touching them (their thread
 * does not exist in the child and their pipes belong to the parent).  Sets *s_p to NULL. */
void pyc_streams_abandon(pyc_streams_t **s_p);

/* Stops the flusher, restores fds 1 and 2, and frees everything; sets *s_p to NULL.  Pending output is
 * published first.  NULL-safe. */
void pyc_streams_destroy(pyc_streams_t **s_p);

#endif
