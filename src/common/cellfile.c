/*
 * cellfile.c -- see cellfile.h.  MurmurHash2 as JupyterLab's debugger computes it over a cell's UTF-8 bytes:
 * four bytes at a time read little-endian, the tail folded in, then the final avalanche.
 */
#include "cellfile.h"

#include <stdio.h>
#include <stdlib.h>

#include "proc.h"

uint32_t
pyc_murmur2(const void *data, size_t len, uint32_t seed)
{
    const uint32_t m = 0x5BD1E995u;
    const unsigned char *p = data;
    uint32_t h = seed ^ (uint32_t)len;
    while (len >= 4) {
        uint32_t k = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
        p += 4;
        len -= 4;
    }
    switch (len) {
    case 3:
        h ^= (uint32_t)p[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)p[1] << 8;
        /* fall through */
    case 1:
        h ^= p[0];
        h *= m;
        break;
    default:
        break;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

int
pyc_cellfile_prefix(char *buf, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] != '/')
        tmp = "/tmp";
    int n = snprintf(buf, cap, "%s/pyc_%ld/", tmp, pyc_proc_self());
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

int
pyc_cellfile_name(const char *code, size_t len, char *buf, size_t cap)
{
    int n = pyc_cellfile_prefix(buf, cap);
    if (n < 0)
        return -1;
    int m = snprintf(buf + n, cap - (size_t)n, "%lu%s", (unsigned long)pyc_murmur2(code, len, PYC_CELLFILE_SEED),
                     PYC_CELLFILE_SUFFIX);
    return m < 0 || (size_t)(n + m) >= cap ? -1 : n + m;
}
