/*
 * zmtp_test.h -- what the three ZMTP test programs share: the bytes a peer sends (greetings, READYs and
 * frames, written out as a libzmq 4.3 peer writes them), and the loop that drives one of our connections
 * until something happens.  All static inline; include after cmocka.h.
 *
 *   test_zmtp_codec.c  zmtp_codec.c without sockets: encoder vectors, the decoder, the corpus refusals
 *   test_zmtp_raw.c    zmtp.c against raw sockets that play a peer (broken, pinging, vanishing)
 *   test_zmtp.c        zmtp.c against real libzmq peers
 */
#ifndef PYC_TEST_ZMTP_H
#define PYC_TEST_ZMTP_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "zmtp.h"

/* The large frame of the connection tests, and the cap of their connections' messages. */
#define BIG (10u << 20)
#define MAX_MSG ((size_t)64 << 20)

/* ---- a peer's bytes -------------------------------------------------------------------------------------- */

/* A byte string under construction (the peer's side of the tests). */
typedef struct bytes {
    unsigned char d[4096];
    size_t n;
} bytes_t;

static inline void
put(bytes_t *b, const void *p, size_t n)
{
    assert_true(b->n + n <= sizeof b->d);
    memcpy(b->d + b->n, p, n);
    b->n += n;
}

/* The greeting a libzmq 4.3 peer sends: version 3.1, NULL, as-server 0. */
static inline void
peer_greeting(bytes_t *b, int major, const char *mech)
{
    unsigned char g[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f};
    g[10] = (unsigned char)major;
    g[11] = 1;
    memcpy(g + 12, mech, strlen(mech));
    put(b, g, sizeof g);
}

/* A short frame. */
static inline void
frame(bytes_t *b, unsigned char flags, const void *body, size_t n)
{
    unsigned char h[2] = {flags, (unsigned char)n};
    assert_true(n <= 255);
    put(b, h, 2);
    put(b, body, n);
}

/* A READY with the given Socket-Type, as libzmq writes it (with an empty Identity). */
static inline void
peer_ready(bytes_t *b, const char *type)
{
    unsigned char body[128];
    size_t n = 0, tl = strlen(type);
    memcpy(body, "\5READY\13Socket-Type", 18);
    n = 18;
    unsigned char len[4] = {0, 0, 0, (unsigned char)tl};
    memcpy(body + n, len, 4);
    memcpy(body + n + 4, type, tl);
    n += 4 + tl;
    memcpy(body + n, "\10Identity\0\0\0\0", 13);
    n += 13;
    frame(b, 0x04, body, n);
}

static inline void
expect_frame(const pyc_zmtp_msg_t *m, size_t i, const void *data, size_t n)
{
    assert_true(i < m->n);
    assert_int_equal(m->frames[i].size, n);
    assert_non_null(m->frames[i].data);
    if (n > 0)
        assert_memory_equal(m->frames[i].data, data, n);
}

/* ---- driving a connection -------------------------------------------------------------------------------- */

static inline double
now_ms(void)
{
    return pyc_now_s() * 1e3;
}

/* Runs c's I/O once, waiting up to ms. */
static inline int
pump(pyc_zmtp_t *c, int ms, pyc_error_t *err)
{
    struct pollfd p = {.fd = pyc_zmtp_fd(c), .events = pyc_zmtp_events(c)};
    int wake = pyc_zmtp_wake_ms(c);
    if (wake >= 0 && wake < ms)
        ms = wake;
    if (p.fd >= 0)
        poll(&p, 1, ms);
    else
        poll(NULL, 0, ms);
    return pyc_zmtp_handle(c, p.fd >= 0 ? p.revents : 0, err);
}

/* Pumps c until a message comes (returned) or ms pass (NULL). */
static inline pyc_zmtp_msg_t *
wait_msg(pyc_zmtp_t *c, int ms)
{
    double end = now_ms() + ms;
    pyc_error_t err;
    while (!pyc_zmtp_has_msg(c) && now_ms() < end) {
        if (pump(c, 10, &err) < 0)
            fail_msg("connection failed: %s", err.text);
    }
    return pyc_zmtp_recv(c);
}

/* Pumps c until everything queued is written. */
static inline void
wait_sent(pyc_zmtp_t *c, int ms)
{
    double end = now_ms() + ms;
    pyc_error_t err;
    while ((!pyc_zmtp_is_up(c) || pyc_zmtp_pending(c) > 0) && now_ms() < end) {
        if (pump(c, 10, &err) < 0)
            fail_msg("connection failed: %s", err.text);
    }
    assert_true(pyc_zmtp_is_up(c));
    assert_int_equal(pyc_zmtp_pending(c), 0);
}

/* Pumps c until it fails; returns the sentence's error. */
static inline void
wait_failure(pyc_zmtp_t *c, int ms, const char *want)
{
    double end = now_ms() + ms;
    pyc_error_t err;
    while (now_ms() < end) {
        if (pump(c, 10, &err) < 0) {
            if (strstr(err.text, want) == NULL)
                fail_msg("refused with \"%s\", expected \"%s\"", err.text, want);
            assert_int_equal(pyc_zmtp_fd(c), -1);
            assert_int_equal(pyc_zmtp_handle(c, 0, &err), -1);   /* for good */
            return;
        }
    }
    fail_msg("the connection did not fail (expected \"%s\")", want);
}

static inline unsigned char *
big_pattern(unsigned seed)
{
    unsigned char *p = malloc(BIG);
    assert_non_null(p);
    for (size_t i = 0; i < BIG; i++)
        p[i] = (unsigned char)(i * 131 + seed + (i >> 12));
    return p;
}

#endif
