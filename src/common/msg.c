/*
 * msg.c -- message ids, ISO 8601 dates and header text.
 *
 * Ids come from a per-thread xoshiro256** generator seeded with 32 bytes of getrandom(2): a kernel sends up
 * to hundreds of thousands of messages a second, and a system call per id would be a visible cost.
 */
#include "msg.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static _Thread_local uint64_t rng_state[4];
static _Thread_local int rng_seeded;

static uint64_t
rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t
rng_next(void)
{
    if (!rng_seeded) {
        if (getrandom(rng_state, sizeof rng_state, 0) != (ssize_t)sizeof rng_state) {
            /* getrandom cannot fail for 32 bytes once the pool is ready; fall back to time and pid. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            rng_state[0] = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ULL;
            rng_state[1] = (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 32);
            rng_state[2] = (uint64_t)(uintptr_t)&rng_state;
            rng_state[3] = 0x2545F4914F6CDD1DULL;
        }
        rng_seeded = 1;
    }
    uint64_t *s = rng_state;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

void
pyc_msg_new_id(char *out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[16];
    uint64_t a = rng_next(), b = rng_next();
    memcpy(r, &a, 8);
    memcpy(r + 8, &b, 8);
    r[6] = (unsigned char)((r[6] & 0x0F) | 0x40);  /* version 4 */
    r[8] = (unsigned char)((r[8] & 0x3F) | 0x80);  /* RFC 4122 variant */
    char *p = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hex[r[i] >> 4];
        *p++ = hex[r[i] & 15];
    }
    *p = '\0';
}

void
pyc_msg_reseed(void)
{
    rng_seeded = 0;
}

void
pyc_msg_now(char *out)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    /* strftime and an unsigned remainder, rather than one snprintf of int fields, because gcc cannot bound
     * the int fields of struct tm and fails -Werror=format-truncation on the single call. */
    size_t k = strftime(out, PYC_MSG_DATE_LEN + 1, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + k, PYC_MSG_DATE_LEN + 1 - k, ".%06uZ", (unsigned)(ts.tv_nsec / 1000) % 1000000u);
}

int
pyc_msg_header(pyc_buf_t *out, const char *msg_type, const char *session, const char *username_json,
               char *msg_id_out)
{
    char id[PYC_MSG_ID_LEN + 1], date[PYC_MSG_DATE_LEN + 1];
    pyc_msg_new_id(id);
    pyc_msg_now(date);
    if (msg_id_out != NULL)
        memcpy(msg_id_out, id, sizeof id);
    return pyc_buf_addf(out,
                        "{\"msg_id\":\"%s\",\"msg_type\":\"%s\",\"session\":\"%s\",\"username\":%s,"
                        "\"date\":\"%s\",\"version\":\"" PYC_PROTOCOL_VERSION "\"}",
                        id, msg_type, session, username_json, date);
}
