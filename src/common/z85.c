/*
 * z85.c -- Z85 (ZeroMQ RFC 32), see z85.h.  Written from the RFC's alphabet and its rule (base 85,
 * big-endian groups of 4 bytes); the test vector of the RFC (86 4F D2 6F B5 59 F7 5B -> "HelloWorld") is in
 * tests/unit/common/test_z85.c.  Decoding is strict: a key that is one character off is an error the user must
 * see, not another key.
 */
#include "z85.h"

#include <stdint.h>
#include <string.h>

static const char alphabet[86] = "0123456789abcdefghijklmnopqrstuvwxyz"
                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/* The value of each character (0..84), or -1 for characters outside the alphabet. */
static int
value_of(unsigned char c)
{
    const char *p = c != 0 ? memchr(alphabet, c, 85) : NULL;
    return p != NULL ? (int)(p - alphabet) : -1;
}

int
pyc_z85_decode(const char *text, size_t len, unsigned char *out, pyc_error_t *err)
{
    if (len % 5 != 0)
        return pyc_error_code(err, PYC_EINVAL, "Z85 text of %zu characters (a multiple of 5 is needed)", len);
    size_t n = 0;
    for (size_t i = 0; i < len; i += 5) {
        uint64_t v = 0;
        for (size_t k = 0; k < 5; k++) {
            int d = value_of((unsigned char)text[i + k]);
            if (d < 0)
                return pyc_error_code(err, PYC_EINVAL, "character %zu is not a Z85 character", i + k + 1);
            v = v * 85 + (uint64_t)d;
        }
        if (v > UINT32_MAX)
            return pyc_error_code(err, PYC_EINVAL, "characters %zu to %zu are not valid Z85", i + 1, i + 5);
        out[n++] = (unsigned char)(v >> 24);
        out[n++] = (unsigned char)(v >> 16);
        out[n++] = (unsigned char)(v >> 8);
        out[n++] = (unsigned char)v;
    }
    return (int)n;
}

int
pyc_z85_encode(const unsigned char *data, size_t n, char *out)
{
    if (n % 4 != 0)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = (uint32_t)data[i] << 24 | (uint32_t)data[i + 1] << 16 | (uint32_t)data[i + 2] << 8 | data[i + 3];
        for (int j = 4; j >= 0; j--) {
            out[k + (size_t)j] = alphabet[v % 85];
            v /= 85;
        }
        k += 5;
    }
    out[k] = '\0';
    return (int)k;
}

int
pyc_z85_key(const char *text, size_t len, unsigned char out[PYC_CURVE_KEY_BYTES], const char *what,
            pyc_error_t *err)
{
    pyc_error_t e;
    if (len != PYC_CURVE_KEY_TEXT)
        return pyc_error_code(err, PYC_EINVAL, "%s is %zu characters long; a CURVE key is 40 characters of Z85 text",
                              what, len);
    if (pyc_z85_decode(text, len, out, &e) < 0)
        return pyc_error_code(err, PYC_EINVAL, "%s is not a CURVE key: %s", what, e.text);
    return 0;
}
