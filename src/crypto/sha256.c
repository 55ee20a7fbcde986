/*
 * sha256.c -- SHA-256 from FIPS 180-4; see sha256.h for why the CLI has its own.
 *
 * Straight from the standard: section 4.1.2 (the six functions), 4.2.2 (the constants K), 5.1.1 (padding),
 * 5.3.3 (the initial hash value H(0)) and 6.2.2 (the compression of one 512-bit block, with the message
 * schedule kept as a rolling window of 16 words).  Words are read big-endian byte by byte, so the code does
 * not care about the host's byte order or alignment.
 *
 * That portable compression runs at about 225 MB/s here, OpenSSL at 1.6 GB/s: `pyc cp` checks the digest
 * of every buffer it moves, so a 1 GB pickle would wait 4 s for it.  On x86 CPUs with the SHA extensions
 * (cpuid leaf 7, EBX bit 29), blocks go through SHA256RNDS2/MSG1/MSG2 instead, the instructions OpenSSL
 * uses; the choice is made once, at the first block.
 */
#include "sha256.h"

#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SHANI 1
#include <cpuid.h>
#include <immintrin.h>
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
#define CH(x, y, z) (((x) & (y)) ^ (~(x) & (z)))
#define MAJ(x, y, z) (((x) & (y)) ^ ((x) & (z)) ^ ((y) & (z)))
#define BSIG0(x) (ROTR(x, 2) ^ ROTR(x, 13) ^ ROTR(x, 22))
#define BSIG1(x) (ROTR(x, 6) ^ ROTR(x, 11) ^ ROTR(x, 25))
#define SSIG0(x) (ROTR(x, 7) ^ ROTR(x, 18) ^ ((x) >> 3))
#define SSIG1(x) (ROTR(x, 17) ^ ROTR(x, 19) ^ ((x) >> 10))

static void
compress(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[16], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t wt;
        if (t < 16) {
            wt = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 | (uint32_t)p[4 * t + 2] << 8 | p[4 * t + 3];
        } else {
            /* W(t) = SSIG1(W(t-2)) + W(t-7) + SSIG0(W(t-15)) + W(t-16), indices mod 16 */
            wt = SSIG1(w[(t - 2) & 15]) + w[(t - 7) & 15] + SSIG0(w[(t - 15) & 15]) + w[t & 15];
        }
        w[t & 15] = wt;
        uint32_t t1 = k + BSIG1(e) + CH(e, f, g) + K[t] + wt;
        uint32_t t2 = BSIG0(a) + MAJ(a, b, c);
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

#ifdef HAVE_SHANI
/* n blocks with the SHA extensions.  The state lives in two registers as the instructions want it, ABEF and
 * CDGH; each group of four rounds takes its four schedule words W(t..t+3) plus K(t..t+3) in one register,
 * SHA256RNDS2 doing two rounds with the low half, then two with the high half. */
__attribute__((target("sha,sse4.1,ssse3"))) static void
compress_shani(uint32_t h[8], const unsigned char *p, size_t n)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i t = _mm_loadu_si128((const __m128i *)&h[0]);        /* DCBA (word 0 lowest) */
    __m128i cdgh = _mm_loadu_si128((const __m128i *)&h[4]);     /* HGFE */
    t = _mm_shuffle_epi32(t, 0xb1);                             /* CDAB */
    cdgh = _mm_shuffle_epi32(cdgh, 0x1b);                       /* EFGH */
    __m128i abef = _mm_alignr_epi8(t, cdgh, 8);                 /* ABEF */
    cdgh = _mm_blend_epi16(cdgh, t, 0xf0);                      /* CDGH */
    for (; n > 0; n--, p += PYC_SHA256_BLOCK) {
        __m128i abef0 = abef, cdgh0 = cdgh, m[4];
        /* Unrolled, m[] lives in registers: 1.8 GB/s, as OpenSSL, instead of 1.2. */
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            if (i < 4) {
                m[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
            } else {
                /* W(t) = SSIG1(W(t-2)) + W(t-7) + SSIG0(W(t-15)) + W(t-16), four words at a time: MSG1 adds
                 * the SSIG0 terms, the aligned registers bring W(t-7), MSG2 adds the SSIG1 terms. */
                __m128i x = _mm_sha256msg1_epu32(m[i & 3], m[(i + 1) & 3]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(m[(i + 3) & 3], m[(i + 2) & 3], 4));
                m[i & 3] = _mm_sha256msg2_epu32(x, m[(i + 3) & 3]);
            }
            __m128i wk = _mm_add_epi32(m[i & 3], _mm_loadu_si128((const __m128i *)&K[4 * i]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0e));
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    t = _mm_shuffle_epi32(abef, 0x1b);                          /* FEBA */
    cdgh = _mm_shuffle_epi32(cdgh, 0xb1);                       /* DCHG */
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(t, cdgh, 0xf0));   /* DCBA */
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(cdgh, t, 8));      /* HGFE */
}

/* 1 when the CPU has SHA, SSSE3 and SSE4.1; 0 when not; -1 before the first look. */
static int shani = -1;

static int
have_shani(void)
{
    if (shani < 0) {
        unsigned a, b, c, d;
        int sse = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 9)) && (c & (1u << 19));
        shani = sse && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29)) ? 1 : 0;
    }
    return shani;
}
#endif

/* n whole blocks. */
static void
blocks(uint32_t h[8], const unsigned char *p, size_t n)
{
#ifdef HAVE_SHANI
    if (have_shani() > 0) {
        compress_shani(h, p, n);
        return;
    }
#endif
    for (; n > 0; n--, p += PYC_SHA256_BLOCK)
        compress(h, p);
}

int
pyc_sha256_accelerated(int use)
{
#ifdef HAVE_SHANI
    if (use == 0)
        shani = 0;
    else if (use > 0)
        shani = -1;
    return have_shani();
#else
    (void)use;
    return 0;
#endif
}

void
pyc_sha256_init(pyc_sha256_t *s)
{
    static const uint32_t h0[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    memcpy(s->h, h0, sizeof h0);
    s->bytes = 0;
    s->used = 0;
}

void
pyc_sha256_update(pyc_sha256_t *s, const void *p, size_t n)
{
    const unsigned char *c = p;
    s->bytes += n;
    if (s->used > 0) {
        size_t take = PYC_SHA256_BLOCK - s->used < n ? PYC_SHA256_BLOCK - s->used : n;
        memcpy(s->buf + s->used, c, take);
        s->used += take;
        c += take;
        n -= take;
        if (s->used < PYC_SHA256_BLOCK)
            return;
        blocks(s->h, s->buf, 1);
        s->used = 0;
    }
    size_t whole = n / PYC_SHA256_BLOCK;
    if (whole > 0) {
        blocks(s->h, c, whole);
        c += whole * PYC_SHA256_BLOCK;
        n -= whole * PYC_SHA256_BLOCK;
    }
    if (n > 0)
        memcpy(s->buf, c, n);
    s->used = n;
}

void
pyc_sha256_final(pyc_sha256_t *s, unsigned char out[PYC_SHA256_DIGEST])
{
    uint64_t bits = s->bytes * 8;
    /* 5.1.1: a 1 bit, zeros up to 448 mod 512, then the length in bits as 64 bits big-endian. */
    s->buf[s->used++] = 0x80;
    if (s->used > 56) {
        memset(s->buf + s->used, 0, PYC_SHA256_BLOCK - s->used);
        blocks(s->h, s->buf, 1);
        s->used = 0;
    }
    memset(s->buf + s->used, 0, 56 - s->used);
    for (int i = 0; i < 8; i++)
        s->buf[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
    blocks(s->h, s->buf, 1);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(s->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)s->h[i];
    }
}

void
pyc_sha256(const void *p, size_t n, unsigned char out[PYC_SHA256_DIGEST])
{
    pyc_sha256_t s;
    pyc_sha256_init(&s);
    pyc_sha256_update(&s, p, n);
    pyc_sha256_final(&s, out);
}
