/*
 * buf.c -- capped growable buffers and the fast JSON string encoder.
 *
 * Growth doubles, so n appends cost O(n) copies in all.  The first allocation is FIRST_ALLOC bytes, so that
 * the buffers a request builds (headers, metadata, reply texts: a few hundred bytes) take one malloc each and
 * no realloc.  Besides the copies, this keeps them in glibc's per-thread cache (tcache: blocks up to 1032
 * bytes, malloc and free only; realloc of NULL is a malloc), where they take no lock: growing a block with
 * realloc (and calloc) always takes the arena's lock, which on the kernel's main thread is contended by
 * libzmq's I/O thread freeing the messages the main thread sent (measured: 1.7 futex calls a pipelined
 * request, most from the 64, 128, 256, 512 steps of a header).
 *
 * The JSON encoder scans for bytes that need care (below 0x20, '"', '\\', and bytes >= 0x80) and copies the
 * runs between them in one memcpy; ASCII text, the common case of stream output, therefore costs about one
 * pass over the bytes.
 */
#include "buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A request of 1000 bytes is a 1008-byte chunk: within the tcache's largest bin (1032). */
#define FIRST_ALLOC 1000

void
pyc_buf_init(pyc_buf_t *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->alloc = 0;
    b->max = max;
}

void
pyc_buf_free(pyc_buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->alloc = 0;
}

void
pyc_buf_reset(pyc_buf_t *b)
{
    b->len = 0;
    if (b->data != NULL)
        b->data[0] = '\0';
}

void
pyc_buf_shrink(pyc_buf_t *b)
{
    if (b->data == NULL || b->alloc - b->len <= 64)
        return;
    char *p = realloc(b->data, b->len + 1);
    if (p != NULL) {
        b->data = p;
        b->alloc = b->len + 1;
    }
}

int
pyc_buf_reserve(pyc_buf_t *b, size_t n)
{
    if (n > b->max || b->len > b->max - n)
        return -1;
    size_t need = b->len + n + 1;
    if (need <= b->alloc)
        return 0;
    size_t a = b->alloc > 0 ? b->alloc : FIRST_ALLOC;
    while (a < need)
        a = a > SIZE_MAX / 2 ? need : a * 2;
    char *p = realloc(b->data, a);
    if (p == NULL)
        return -1;
    b->data = p;
    b->alloc = a;
    return 0;
}

int
pyc_buf_add(pyc_buf_t *b, const void *p, size_t n)
{
    if (pyc_buf_reserve(b, n) < 0)
        return -1;
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int
pyc_buf_adds(pyc_buf_t *b, const char *s)
{
    return pyc_buf_add(b, s, strlen(s));
}

int
pyc_buf_addf(pyc_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || pyc_buf_reserve(b, (size_t)n) < 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int
pyc_buf_add_int(pyc_buf_t *b, long long v)
{
    char digits[24];             /* 19 digits of 2^63, a sign */
    char *p = digits + sizeof digits;
    /* The magnitude as unsigned, so that LLONG_MIN has one too. */
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        *--p = '-';
    return pyc_buf_add(b, p, (size_t)(digits + sizeof digits - p));
}

/* Length of the valid UTF-8 sequence at s (at most n bytes available), or 0 when it is not valid. */
static size_t
utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

size_t
pyc_utf8_complete_prefix(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    /* Look back at most 3 bytes for the lead byte of a sequence that runs past the end. */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = u[n - back];
        if ((c & 0xC0) == 0x80)
            continue;            /* continuation byte: keep looking for the lead */
        /* 0xC0, 0xC1 and 0xF5..0xFF never begin a valid sequence, so there is nothing to wait for. */
        size_t want = c >= 0xF5 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 1;
        return want > back ? n - back : n;
    }
    return n;
}

int
pyc_buf_add_json_string(pyc_buf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t start_len = b->len;
    size_t i = 0, run = 0;

    /* Reserve for the common case (no escapes) at once; escapes grow the buffer as they come. */
    if (pyc_buf_reserve(b, n + 2) < 0)
        return -1;
    b->data[b->len++] = '"';
    while (i < n) {
        /* Eight plain ASCII bytes at a time: none below 0x20, none '"' or '\\', none >= 0x80. */
        while (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, u + i, 8);
            const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
            uint64_t ctl = (v - ones * 0x20) & ~v;
            uint64_t quote = v ^ (ones * '"'), bslash = v ^ (ones * '\\');
            uint64_t special = (ctl | ((quote - ones) & ~quote) | ((bslash - ones) & ~bslash) | v) & high;
            if (special != 0)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        unsigned char c = u[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t l = utf8_seq(u + i, n - i);
            if (l > 0) {
                i += l;
                continue;
            }
        }
        if (pyc_buf_add(b, s + run, i - run) < 0)
            goto fail;
        char esc[8];
        size_t elen = 2;
        esc[0] = '\\';
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            if (c < 0x20) {
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                elen = 6;
            } else {
                memcpy(esc, "\xEF\xBF\xBD", 3);  /* invalid UTF-8 byte -> U+FFFD */
                elen = 3;
            }
        }
        if (pyc_buf_add(b, esc, elen) < 0)
            goto fail;
        i++;
        run = i;
    }
    if (pyc_buf_add(b, s + run, i - run) < 0 || pyc_buf_add(b, "\"", 1) < 0)
        goto fail;
    return 0;
fail:
    b->len = start_len;
    if (b->data != NULL)
        b->data[b->len] = '\0';
    return -1;
}

char *
pyc_buf_detach(pyc_buf_t *b, size_t *len)
{
    char *p = b->data;
    if (len != NULL)
        *len = b->len;
    b->data = NULL;
    b->len = 0;
    b->alloc = 0;
    return p;
}

int
pyc_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}
