/*
 * buf.h -- a growable byte buffer with a hard cap, after curl's dynbuf.
 *
 * Every buffer that grows from outside input has a limit fixed at creation; an append that would pass it
 * fails with -1 and leaves the buffer as it was.  The bytes are always followed by a NUL (not counted in
 * len), so text can be handed to C string functions.  Also here: the JSON string encoder used on the hot
 * path of stream output, which copies runs of plain bytes with memcpy and repairs invalid UTF-8, and the
 * one loop that writes a whole buffer to a file descriptor.
 */
#ifndef PYC_BUF_H
#define PYC_BUF_H

#include <stddef.h>

typedef struct pyc_buf {
    char *data;                  /* NULL until the first append */
    size_t len;
    size_t alloc;
    size_t max;                  /* the cap on len */
} pyc_buf_t;

/* Sets up an empty buffer that may hold up to max bytes.  Allocates nothing. */
void pyc_buf_init(pyc_buf_t *b, size_t max);

/* Frees the storage and returns the buffer to its empty state (the cap is kept). */
void pyc_buf_free(pyc_buf_t *b);

/* Empties the buffer but keeps its storage for reuse. */
void pyc_buf_reset(pyc_buf_t *b);

/* Gives back the room beyond len (a buffer kept long after it is filled: the first allocation is 1000
 * bytes).  Keeps the buffer as it is when the smaller block cannot be had. */
void pyc_buf_shrink(pyc_buf_t *b);

/* Appends n bytes.  Returns 0, or -1 (buffer unchanged) when the cap would be passed or memory runs out. */
int pyc_buf_add(pyc_buf_t *b, const void *p, size_t n);

/* Appends a NUL-terminated string. */
int pyc_buf_adds(pyc_buf_t *b, const char *s);

/* Appends printf-formatted text. */
int pyc_buf_addf(pyc_buf_t *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Appends v in decimal, as printf's "%lld" would, without printf's cost (the hot path writes a few numbers per
 * reply). */
int pyc_buf_add_int(pyc_buf_t *b, long long v);

/* Appends s (n bytes, possibly with NULs and invalid UTF-8) as a quoted JSON string.  Control characters,
 * quote and backslash are escaped; every byte sequence that is not valid UTF-8 becomes U+FFFD, so the
 * result is always valid JSON. */
int pyc_buf_add_json_string(pyc_buf_t *b, const char *s, size_t n);

/* Makes room for at least n more bytes; returns 0 or -1 like pyc_buf_add. */
int pyc_buf_reserve(pyc_buf_t *b, size_t n);

/* Takes the storage out of the buffer (the caller frees it with free()) and leaves the buffer empty.  Returns
 * NULL for an empty buffer that never allocated. */
char *pyc_buf_detach(pyc_buf_t *b, size_t *len);

/* Writes all n bytes to fd, retrying after EINTR and short writes.  Returns 0, or -1 with errno set. */
int pyc_write_all(int fd, const void *p, size_t n);

/* Length of the longest prefix of s[0..n) that does not end inside a UTF-8 sequence that might still be
 * completed by more bytes.  Used to split a byte stream into text chunks without cutting a character. */
size_t pyc_utf8_complete_prefix(const char *s, size_t n);

/* Writes the n bytes at raw as 2 * n lowercase hex digits and a NUL into out (2 * n + 1 bytes). */
static inline void
pyc_hex_encode(const void *raw, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *r = raw;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[2 * n] = '\0';
}

#endif
