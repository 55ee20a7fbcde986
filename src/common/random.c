/*
 * random.c -- see random.h.
 */
#include "random.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "buf.h"

int
pyc_random_bytes(void *buf, size_t n, pyc_error_t *err)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return pyc_error_set(err, "getrandom: %s", got < 0 ? strerror(errno) : "no bytes");
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

int
pyc_random_hex(char *out, size_t nbytes, pyc_error_t *err)
{
    unsigned char raw[128];
    if (nbytes > sizeof raw)
        return pyc_error_set(err, "pyc_random_hex: %zu bytes asked, at most %zu", nbytes, sizeof raw);
    if (pyc_random_bytes(raw, nbytes, err) < 0) {
        out[0] = '\0';
        return -1;
    }
    pyc_hex_encode(raw, nbytes, out);
    return 0;
}
