/*
 * pickle.c -- out-of-band buffers of a protocol-5 pickle put back in band; see pickle.h.
 *
 * Argument layouts, from Lib/pickletools.py: fixed widths (1, 2, 4 or 8 bytes), a length prefix of 1, 4 or 8
 * bytes little-endian followed by that many bytes, one newline-terminated line (protocol 0 text opcodes), or
 * two lines (GLOBAL and INST).
 */
#include "pickle.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

enum {
    A_NONE,          /* no argument */
    A_FIX1, A_FIX2, A_FIX4, A_FIX8,
    A_LEN1,          /* uint1 length, then data */
    A_LEN4U,         /* uint4 length */
    A_LEN4S,         /* int4 length that must not be negative */
    A_LEN8,          /* uint8 length */
    A_LINE,          /* up to and including '\n' */
    A_LINE2,         /* two lines */
    A_BAD,           /* not an opcode */
};

#define OP_STOP '.'
#define OP_FRAME 0x95
#define OP_BYTEARRAY8 0x96
#define OP_NEXT_BUFFER 0x97

/* The argument layout of each opcode byte. */
static unsigned char
layout(unsigned char op)
{
    switch (op) {
    case '(': case '.': case '0': case '1': case '2': case 'N': case 'Q': case 'R': case 'a': case 'b':
    case 'd': case '}': case 'e': case 'l': case ']': case 'o': case 's': case 't': case ')': case 'u':
    case 0x81: case 0x85: case 0x86: case 0x87: case 0x88: case 0x89: case 0x8f: case 0x90: case 0x91:
    case 0x92: case 0x93: case 0x94: case 0x97: case 0x98:
        return A_NONE;
    case 'K': case 'h': case 'q': case 0x80: case 0x82:
        return A_FIX1;
    case 'M': case 0x83:
        return A_FIX2;
    case 'J': case 'j': case 'r': case 0x84:
        return A_FIX4;
    case 'G': case 0x95:
        return A_FIX8;
    case 'U': case 'C': case 0x8c: case 0x8a:
        return A_LEN1;
    case 'X': case 'B':
        return A_LEN4U;
    case 'T': case 0x8b:
        return A_LEN4S;
    case 0x8d: case 0x8e: case 0x96:
        return A_LEN8;
    case 'F': case 'I': case 'L': case 'P': case 'S': case 'V': case 'g': case 'p':
        return A_LINE;
    case 'c': case 'i':
        return A_LINE2;
    default:
        return A_BAD;
    }
}

static uint64_t
le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* The length in bytes of the argument of an opcode at p[0] (the opcode excluded), with `left` bytes after the
 * opcode.  Returns 0 and sets *len, or -1 when the argument is truncated or malformed. */
static int
arg_len(unsigned char kind, const unsigned char *p, size_t left, size_t *len)
{
    static const unsigned char fixed[] = {[A_FIX1] = 1, [A_FIX2] = 2, [A_FIX4] = 4, [A_FIX8] = 8};
    uint64_t n;
    switch (kind) {
    case A_NONE:
        *len = 0;
        return 0;
    case A_FIX1: case A_FIX2: case A_FIX4: case A_FIX8:
        *len = fixed[kind];
        return *len <= left ? 0 : -1;
    case A_LEN1:
        if (left < 1)
            return -1;
        n = p[0];
        *len = 1 + (size_t)n;
        break;
    case A_LEN4U: case A_LEN4S:
        if (left < 4)
            return -1;
        n = le(p, 4);
        if (kind == A_LEN4S && n > INT32_MAX)
            return -1;
        *len = 4 + (size_t)n;
        break;
    case A_LEN8:
        if (left < 8)
            return -1;
        n = le(p, 8);
        if (n > left - 8)
            return -1;
        *len = 8 + (size_t)n;
        break;
    case A_LINE: case A_LINE2: {
        const unsigned char *nl = memchr(p, '\n', left);
        if (nl == NULL)
            return -1;
        size_t l = (size_t)(nl - p) + 1;
        if (kind == A_LINE2) {
            const unsigned char *nl2 = memchr(nl + 1, '\n', left - l);
            if (nl2 == NULL)
                return -1;
            l = (size_t)(nl2 - p) + 1;
        }
        *len = l;
        return 0;
    }
    default:
        return -1;
    }
    return *len <= left ? 0 : -1;
}

/* One walk over the pickle.  With write NULL it only checks, and every refusal happens here; with write set
 * (after a check passed) it writes, and can fail only in write.  Returns 0, or -1 with err (its code says
 * which: PYC_EINVAL for a refusal, PYC_EIO for a failed write). */
static int
walk(const pyc_frame_t *main, const pyc_frame_t *bufs, size_t nbufs, pyc_pickle_write_fn write, void *ctx,
     pyc_error_t *err)
{
    const unsigned char *p = main->data;
    size_t n = main->size, i = 0, run = 0, used = 0;
    bool stopped = false;
    /* Without buffers nothing changes: the pickle is only checked, and written whole at the end. */
    bool rewrite = nbufs > 0;

    /* Bytes p[run..i) are unchanged input not yet written. */
#define FLUSH(upto)                                                                                              \
    do {                                                                                                         \
        if (write != NULL && (upto) > run && write(ctx, p + run, (upto) - run) < 0)                              \
            goto write_failed;                                                                                   \
    } while (0)

    while (i < n) {
        unsigned char op = p[i], kind = layout(op);
        size_t len;
        if (kind == A_BAD)
            return pyc_error_code(err, PYC_EINVAL, "not a pickle this program knows: byte 0x%02x at offset %zu is "
                                  "no opcode", op, i);
        if (arg_len(kind, p + i + 1, n - i - 1, &len) < 0)
            return pyc_error_code(err, PYC_EINVAL, "the pickle is truncated or malformed at offset %zu (opcode "
                                  "0x%02x)", i, op);
        if (op == OP_FRAME && rewrite) {
            FLUSH(i);
            i += 1 + len;
            run = i;
            continue;
        }
        if (op == OP_NEXT_BUFFER) {
            if (used == nbufs)
                return pyc_error_code(err, PYC_EINVAL, "the pickle asks for out-of-band buffer %zu, but there are "
                                      "only %zu", used + 1, nbufs);
            FLUSH(i);
            unsigned char head[9];
            uint64_t size = bufs[used].size;
            head[0] = OP_BYTEARRAY8;
            for (int b = 0; b < 8; b++)
                head[1 + b] = (unsigned char)(size >> (8 * b));
            if (write != NULL &&
                (write(ctx, head, sizeof head) < 0 || (size > 0 && write(ctx, bufs[used].data, bufs[used].size) < 0)))
                goto write_failed;
            used++;
            i++;
            run = i;
            continue;
        }
        i += 1 + len;
        if (op == OP_STOP) {
            stopped = true;
            break;
        }
    }
    if (!stopped)
        return pyc_error_code(err, PYC_EINVAL, "the pickle ends without a STOP opcode");
    if (i != n)
        return pyc_error_code(err, PYC_EINVAL, "%zu bytes follow the pickle's STOP opcode", n - i);
    if (used != nbufs)
        return pyc_error_code(err, PYC_EINVAL, "the pickle used %zu of its %zu out-of-band buffers", used, nbufs);
    FLUSH(i);
    return 0;
#undef FLUSH

write_failed: {
    int e = errno;
    pyc_error_code(err, PYC_EIO, "cannot write the pickle: %s", strerror(e));
    errno = e;
    return -1;
}
}

int
pyc_pickle_inband(const pyc_frame_t *main, const pyc_frame_t *bufs, size_t nbufs, pyc_pickle_write_fn write,
                  void *ctx, pyc_error_t *err)
{
    /* Check the whole pickle before the first byte goes out: a refusal found late must not leave a partial
     * pickle behind, on a stdout that cannot be taken back. */
    if (walk(main, bufs, nbufs, NULL, NULL, err) < 0)
        return -1;
    return walk(main, bufs, nbufs, write, ctx, err);
}
