/*
 * pickle.h -- turns a protocol-5 pickle with out-of-band buffers into one self-contained pickle.
 *
 * The comm target pyc.pickle answers a get with the main pickle and its out-of-band buffers (NumPy and pandas
 * data) as separate message frames.  A pickle *file* must load with a plain pickle.load(), so `pyc cp
 * session:var file.pkl` writes the pickle with every NEXT_BUFFER opcode replaced by BYTEARRAY8 and the
 * buffer's bytes, which is what pickle.dumps itself writes for a writable PickleBuffer without a
 * buffer_callback.  A READONLY_BUFFER that follows stays: it turns the bytearray into a read-only
 * memoryview, as it did the out-of-band buffer.  FRAME opcodes are dropped, since the frames they announce
 * grow; framing is an optional read-ahead hint that every unpickler of protocol 4 and 5 does without.
 *
 * The walk knows the argument layout of every opcode of protocols 0 to 5 (Lib/pickletools.py), so bytes
 * inside strings are never mistaken for opcodes.  An opcode it does not know, a truncated argument, a
 * NEXT_BUFFER past the last buffer, buffers left unused, or bytes after STOP are refused: the file would not
 * load.  The whole pickle is checked before anything is written, so a refusal never leaves part of a pickle
 * behind (on a stdout it could not be taken back from).  Output goes through a callback in runs, so a
 * gigabyte of buffers is never copied into one block.
 */
#ifndef PYC_PICKLE_H
#define PYC_PICKLE_H

#include <stddef.h>

#include "auth.h"
#include "error.h"

/* The largest frame a buffer of a put travels in: a larger one goes as consecutive frames of this size, and the
 * put's "frames" lists the count per buffer (the rule of kernel/python/pyc/_digest.py, "Frames"), since a
 * kernel takes frames of at most 256 MiB on shell from a peer it does not know yet. */
#define PYC_PICKLE_FRAME_MAX ((size_t)256 << 20)

/* Writes n bytes; returns 0, or -1 (with errno set) to stop the rewrite. */
typedef int (*pyc_pickle_write_fn)(void *ctx, const void *p, size_t n);

/* Rewrites the pickle `main` with its out-of-band buffers bufs[0..nbufs) as one in-band pickle, handed to
 * write in order.  With nbufs 0 the pickle is still checked, then written unchanged.  Returns 0, or -1 with
 * err: err->code is PYC_EINVAL when the pickle is malformed or does not match the buffers (write was not
 * called at all), PYC_EIO when write failed (errno is write's; part of the pickle may have been written). */
int pyc_pickle_inband(const pyc_frame_t *main, const pyc_frame_t *bufs, size_t nbufs, pyc_pickle_write_fn write,
                      void *ctx, pyc_error_t *err);

#endif
